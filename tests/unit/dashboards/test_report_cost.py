"""What a token cost, as `llmchaos report` prints it: each language and phase's J/token and $/Mtok beside
its multiple of the baseline's in the phase table (the ground truth: Σ energy / Σ tokens of the blocks),
the cost table with where the energy came from, the why of an absent one, and nothing for a run that
asked for none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks._synthetic_run import write
from dashboards.formats.text import value
from tests.inprocess import llmchaos
from tests.unit.dashboards.test_cost import FAULT, N, with_absent, with_energy

PHASES = ("baseline", "slow")


@pytest.fixture(scope="module")
def fault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose window `slow` made every latency three times as long."""
    return write(tmp_path_factory.mktemp("runs") / "fault", N, seed=3, drift=0.0, fault=FAULT)


def test_report_shows_each_phase_s_cost_against_baseline_and_its_j_per_token_is_the_blocks(fault, tmp_path, capsys):
    run_dir = with_energy(fault, tmp_path / "fault", 0.5, seed=4, slow=1.6)
    blocks = json.loads((run_dir / "run.json").read_text())["energy"]["blocks"]
    truth = {}
    for phase in PHASES:
        mine = [b for b in blocks if (b["lang"], b["phase"]) == ("de", phase)]
        truth[phase] = sum(b["energy_j"] for b in mine) / sum(b["tokens"] for b in mine)
    md = llmchaos(capsys, "report", str(run_dir), "--md")
    assert md.returncode == 0, md.stderr
    head = next(line for line in md.stdout.splitlines() if line.startswith("| lang | phase | TTFT p50 |"))
    assert head.endswith("| J/token | $/Mtok | requests | ok |")
    base, slow = ([line for line in md.stdout.splitlines() if line.startswith(f"| de | {p} | ")] for p in PHASES)
    assert f"| {value(truth['baseline'], 'J/token')} |" in base[0]  # the phase table's
    assert f"| {value(truth['slow'], 'J/token')} ×1.6 |" in slow[0]  # beside its multiple of the baseline's
    assert f"| {value(truth['slow'], 'J/token')} |" in slow[1]  # the cost table's
    assert slow[1].endswith(" | measured |")
    assert "#### Cost per output token" in md.stdout
    energy = json.loads((run_dir / "run.json").read_text())["energy"]
    assert (
        'energy: measured, by counter from http://prometheus:9090 {Hostname="gpu-1"}, 1 GPU (GPU-1), '
        f"{energy['samples']} samples every 1 s; {energy['energy_j']:.1f} J, 12.5 J of it while no token was made; "
        "priced at $2 per GPU-hour and $0.25 per kWh"
    ) in md.stdout
    assert "| lang | phase | output tokens | requests | J/token | J/request | $/Mtok | source |" in md.stdout
    text = llmchaos(capsys, "report", str(run_dir)).stdout
    lines = text[text.index("per phase, against baseline:") :].splitlines()
    assert lines[1].split() == ["lang", "phase", "TTFT", "p50", "TTFT", "p99", "ITL", "p50", "ITL", "p99",
                                "J/token", "$/Mtok", "requests", "ok"]  # fmt: skip
    (row,) = [line.split("  ") for line in lines if line.startswith("de ") and " slow " in line]
    cells = [c.strip() for c in row if c.strip()]
    assert cells[2].endswith("×3")  # the window made every latency three times as long
    assert cells[6] == f"{value(truth['slow'], 'J/token')} ×1.6"
    page = tmp_path / "run.html"
    assert llmchaos(capsys, "report", str(run_dir), "--html", str(page)).returncode == 0
    assert "<h2>Cost per output token</h2>" in page.read_text()
    assert f"<td>{value(truth['slow'], 'J/token')} ×1.6</td>" in page.read_text()


def test_report_says_why_the_cost_is_absent_and_nothing_of_a_run_that_asked_for_none(fault, tmp_path, capsys):
    absent = with_absent(fault, tmp_path / "absent")
    for args in ((), ("--md",)):
        out = llmchaos(capsys, "report", str(absent), *args).stdout
        assert out.count("cost: absent (NVML: no GPU on this host)") == 1, out
        assert "J/token" not in out
    for args in ((), ("--md",), ("--html", str(tmp_path / "r.html"))):
        out = llmchaos(capsys, "report", str(fault), *args).stdout
        assert not [word for word in ("cost", "J/token", "energy") if word in out.lower()], out
    assert "Cost per output token" not in (tmp_path / "r.html").read_text()
