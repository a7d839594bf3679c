"""`make nightly` against the real reference server: the first night sets the baseline (and pushes
its run to a real Pushgateway, PUSHGATEWAY_URL being set), an unchanged
build is green (and `llmchaos compare` of the two real runs finds no cell worse), a build whose sim
cost is 20 % higher is red: `llmchaos regress` exits 1 and names the cells, in its table and as
failed JUnit test cases, with the HTML report written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

from tests.procs import ROOT
from tests.services import pushgateway

LANGS = ("en", "de", "ja")
COMPARE = [sys.executable, "-m", "llmchaos.cli", "compare"]  # at the medians and 10 %, as the gate


def nightly(top: Path, rules: Path, server_args: str = "", gateway: str = "") -> subprocess.CompletedProcess[str]:
    """One night: one 24 s run (2 s of warmup) of 10 requests/s (open loop), gated on the medians
    at +10 % (this shared 2-core host moves an unchanged build's ITL median by a few per cent
    between runs; the slowed build moves it by 20). 22 s of steady load: a verdict needs 8 time blocks as long as the
    series' memory, and when other processes crowd this host its slow spells last seconds (12 s
    then held 6 or 7 blocks: every cell inconclusive, NO VERDICT)."""
    env = {k: v for k, v in os.environ.items() if k != "PUSHGATEWAY_URL"}
    env |= {
        "NIGHTLY_DIR": str(top),
        "NIGHTLY_RUNS": "1",
        "NIGHTLY_DURATION": "24s",
        "NIGHTLY_RATE": "10",
        "NIGHTLY_WARMUP": "2s",
        "NIGHTLY_LANGS": ",".join(LANGS),
        "NIGHTLY_RULES": str(rules),
        "NIGHTLY_SERVER_ARGS": server_args,
    }
    if gateway:
        env["PUSHGATEWAY_URL"] = gateway
    # -o: the venv is installed already (make would reinstall it when pyproject.toml is newer)
    proc = subprocess.Popen(
        ["make", "-s", "-o", ".venv/.installed", "nightly"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # make, the nightly script and the server it started
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def nights(top: Path) -> list[Path]:
    return sorted(p for p in top.iterdir() if p.name[:1].isdigit())


@pytest.mark.timing
def test_nightly_sets_a_baseline_is_green_unchanged_and_red_on_a_slower_build(tmp_path):
    """Three nights: the first sets the baseline, an unchanged build is green, a build 20 % slower is red.

    Long (about 80 s here): three `make nightly`s, each starting the server for one 24 s run and gating it, and a
    compare between two of them (the `nightly` helper says why a run needs those 24 s)."""
    top, rules = tmp_path / "nightly", tmp_path / "rules.yaml"
    # the medians only: another process crowding this host doubled an unchanged build's ITL p95
    rules.write_text(
        "defaults: {increase_pct: 10}\n"
        + "".join(f"{lang}: {{ttft: {{percentiles: [p50]}}, itl: {{percentiles: [p50]}}}}\n" for lang in LANGS)
    )

    with pushgateway() as gw:  # PUSHGATEWAY_URL set: the night's run is pushed, grouped by its run_id
        first = nightly(top, rules, gateway=gw)
        pushed = httpx.get(gw + "/metrics", timeout=10).text
    assert first.returncode == 0, first.stdout + first.stderr
    assert "tonight's 1 runs are the baseline now" in first.stdout
    (baseline,) = (top / "baseline").iterdir()
    assert "llmchaos_requests_total{" in pushed
    assert f'run_id="{baseline.name}"' in pushed

    green = nightly(top, rules)
    assert green.returncode == 0, green.stdout + green.stderr
    assert "\nNO WORSE: " in green.stdout, green.stdout[:2500]
    tonight = nights(top)[-1]
    assert ET.parse(tonight / "junit.xml").getroot().get("failures") == "0"
    (run,) = (tonight / "runs").iterdir()
    aa = subprocess.run(
        [*COMPARE, str(baseline), str(run), "--json", "--percentiles", "p50", "--min-effect", "10%"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert aa.returncode == 0, aa.stdout[:2500] + aa.stderr
    cells = json.loads(aa.stdout)["cells"]
    assert not [c for c in cells if c["verdict"] == "worse"]
    # the runs could have shown a change: an ITL median is judged, not left inconclusive (on a busy host
    # a language's can be: its smallest detectable change then exceeds 10 %)
    itl = [(c["lang"], c["verdict"], c["reason"]) for c in cells if (c["metric"], c["stat"]) == ("itl", "p50")]
    assert any(verdict == "no change" for _, verdict, _ in itl), itl

    red = nightly(top, rules, "--sim-time-scale 1.2")
    assert red.returncode == 2, red.stdout[:2500] + red.stderr  # make's status for any failed recipe ...
    assert "nightly] Error 1" in red.stderr  # ... and the gate's: 1, a regression
    assert "\nWORSE: B is worse than A in " in red.stdout
    assert "nightly: REGRESSION" in red.stdout
    worse = [line for line in red.stdout.splitlines() if line.startswith("worse ")]
    for lang in LANGS:
        assert any(f" {lang} ITL p50 (baseline) " in line for line in worse), red.stdout[-3000:]
    tonight = nights(top)[-1]
    failed = {
        f"{c.get('classname')}.{c.get('name')}"
        for c in ET.parse(tonight / "junit.xml").getroot().iter("testcase")
        if c.find("failure") is not None
    }
    assert {f"llmchaos.{lang}.itl.baseline.p50" for lang in LANGS} <= failed
    assert "WORSE: B is worse than A" in (tonight / "report.html").read_text()
    assert len(list((top / "history").iterdir())) == 3
