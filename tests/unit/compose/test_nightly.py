"""The CI files users copy (the GitHub workflow, the GitLab job in docs/compare.md) run `make nightly` and keep,
from night to night, the very folders compose/nightly.py reads its baseline and history from."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from compose.nightly import BASELINE, DEFAULT_DIR, HISTORY
from tests.procs import ROOT

TOP = DEFAULT_DIR
KEPT = {f"{TOP}/{BASELINE}", f"{TOP}/{HISTORY}"}


def test_the_github_workflow_runs_make_nightly_and_keeps_baseline_and_history():
    doc = yaml.safe_load((Path(ROOT) / ".github/workflows/nightly-perf.yml").read_text())
    steps = doc["jobs"]["nightly"]["steps"]
    assert any(s.get("run") == "make nightly" for s in steps)
    for action in ("actions/cache/restore@v4", "actions/cache/save@v4"):
        (step,) = [s for s in steps if s.get("uses") == action]
        assert set(step["with"]["path"].split()) == KEPT
    (upload,) = [s for s in steps if s.get("uses") == "actions/upload-artifact@v4"]
    assert f"{TOP}/*/junit.xml" in upload["with"]["path"].split()
    assert doc[True]["schedule"]  # YAML 1.1 reads the key `on` as true


def test_the_documented_gitlab_job_runs_make_nightly_and_caches_baseline_and_history():
    readme = (Path(ROOT) / "docs" / "compare.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "nightly-perf:" in b]
    job = yaml.safe_load(block)["nightly-perf"]
    assert "make nightly" in job["script"]
    assert set(job["cache"]["paths"]) == KEPT
    assert job["artifacts"]["reports"]["junit"] == f"{TOP}/*/junit.xml"
