"""A results directory written by a real Locust run (a master and two workers) and read back
through the core's run model: the same summaries and the same merged histograms as run.json
says; a damaged directory is one line and exit 2 through the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmchaos import run
from llmchaos.run import Summary
from tests.integration.loadtest_helpers import distributed
from tests.procs import ROOT, serve


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("results")
    with serve("--sim-time-scale", "0.3") as server:
        proc = distributed(
            "--host",
            server.url,
            "--results-dir",
            str(out),
            "-u",
            "6",
            "-r",
            "6",
            "-t",
            "4s",
            "--langs",
            "en,de,ja",
            "--max-tokens",
            "16",
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = [p for p in out.iterdir() if p.is_dir()]
    return path


def test_the_model_reads_back_what_run_json_says(run_dir):
    raw = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    results = run.load(run_dir)
    assert results.run.to_json() == raw  # every field, typed and written back unchanged
    assert results.run.schema_version == run.SCHEMA_VERSION
    assert {s["lang"] for s in raw["summaries"]} == {"en", "de", "ja"}
    summaries = results.summaries()
    assert set(summaries) == {key for key, _ in results.histograms}
    for key, summary in summaries.items():
        h = results.histogram(key)
        assert h is not None
        assert h.count == summary.count  # exact counts
        assert Summary.of(key, h) == summary  # the same percentiles from the histogram as in run.json


def test_the_merged_histograms_count_every_request_written(run_dir):
    results = run.load(run_dir)
    lines = list(results.requests())
    assert len(lines) == results.run.requests.written > 0
    for lang in ("en", "de", "ja"):
        ok = [r for r in lines if r.lang == lang and r.outcome == "ok"]
        ttft = results.histograms.combined("ttft", lang=lang)
        itl = results.histograms.combined("inter_chunk", lang=lang)
        assert ok
        assert ttft is not None
        assert itl is not None
        assert ttft.count == len(ok)
        assert itl.count == sum(len(r.gaps) for r in ok)
        outcomes = sum(o.count for o in results.run.outcomes if o.lang == lang)
        assert outcomes == sum(1 for r in lines if r.lang == lang)


def report(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "report", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_report_prints_the_run(run_dir):
    proc = report(run_dir)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"llmchaos run {run_dir.name} -> {run_dir}"
    assert {line.split()[0] for line in lines[2:5]} == {"en", "de", "ja"}


def damaged(run_dir: Path, tmp_path: Path, how: str) -> Path:
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    run_json = copy / "run.json"
    if how == "newer schema":
        data = json.loads(run_json.read_text(encoding="utf-8"))
        run_json.write_text(json.dumps({**data, "schema_version": run.SCHEMA_VERSION + 1}), encoding="utf-8")
    elif how == "truncated run.json":
        text = run_json.read_text(encoding="utf-8")
        run_json.write_text(text[: len(text) // 2], encoding="utf-8")
    elif how == "no histograms":
        shutil.rmtree(copy / "histograms")
    elif how == "a corrupt histogram":
        (copy / "histograms" / "0000.hdr").write_text("HISTFAAAA\n", encoding="ascii")
    elif how == "no requests.jsonl":
        (copy / "requests.jsonl").unlink()
    elif how == "a bad field":
        data = json.loads(run_json.read_text(encoding="utf-8"))
        data["summaries"][0]["count"] = "many"
        run_json.write_text(json.dumps(data), encoding="utf-8")
    return copy


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("newer schema", "run.json: schema_version: schema_version 2 is newer than this llmchaos reads (1)"),
        ("truncated run.json", "run.json:"),
        ("no histograms", "histograms/index.json: No such file or directory"),
        ("a corrupt histogram", "histograms/0000.hdr: not an HDR histogram"),
        ("no requests.jsonl", "requests.jsonl: missing"),
        ("a bad field", "run.json: summaries.0.count:"),
    ],
)
def test_a_damaged_results_directory_is_one_line_and_exit_2(run_dir, tmp_path, how, says):
    copy = damaged(run_dir, tmp_path, how)
    proc = report(copy)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"llmchaos: error: {copy}/"), proc.stderr
    assert says in proc.stderr, proc.stderr
    if how == "truncated run.json":
        assert "invalid JSON (truncated?)" in proc.stderr
        assert f"{copy}/run.json:" in proc.stderr
