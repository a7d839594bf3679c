import subprocess
import sys

from tests.procs import ROOT
from tests.unit.faults.schedules import GOOD


def test_cli_rejects_a_bad_schedule_with_exit_2_and_touches_nothing(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(GOOD.replace("kind: sse", "kind: plague"))  # an unknown kind, as test_schedule.BAD[0]
    journal = tmp_path / "journal.json"
    r = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "run", str(p), "--journal", str(journal)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "faults[0].kind" in r.stderr
    assert not journal.exists()


def test_dry_run_prints_the_plan(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(GOOD)
    r = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "run", str(p), "--dry-run", "--duration", "10"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("seed 7; 3 windows")
    assert "slow-gpu" in lines[1]
    assert "drop" in lines[2]
