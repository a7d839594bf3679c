"""What a token cost, as `compare` and `regress` judge it: J/token and $/Mtok cells made of run.json's
energy blocks (worse at +20 %, no change when alike, their figure Σ energy / Σ tokens of the blocks, not
judged where a side's energy is absent or of another source), and the rules that gate them. The run
copies with energy (`with_energy`, `with_absent`) serve the report's tests too (test_report_cost.py)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from benchmarks._synthetic_run import API, TARGET, write
from dashboards.comparison import cost, history, rules
from dashboards.comparison.blocks import Blocks
from dashboards.comparison.sample import CellKey, Known, Ratio
from dashboards.comparison.verdicts import Settings
from llmchaos import run
from tests.inprocess import llmchaos
from tests.unit.dashboards.test_commands import regress, with_rows

N = 6000  # requests per run: 30 s at 200/s
LANGS = ("en", "de", "ja")
PRICES = {"price_per_gpu_hour": 2.0, "price_per_kwh": 0.25}
FAULT = (10.0, 20.0)  # seconds from the start of the run with a fault window, `slow`
IDLE_J = 12.5  # energy in intervals no token was made in


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("runs")
    return {
        "a": write(d / "a", N, seed=1, drift=0.0),
        "b": write(d / "b", N, seed=2, drift=0.0),
    }


def energy_blocks(src: Path, j_per_token: float, seed: int, slow: float = 1.0) -> list[dict]:
    """One sampling interval a second over the run, shared out among the languages by their tokens,
    each language's tokens costing `j_per_token` (times `slow` in the fault window) within 2 %."""
    raw = json.loads((src / "run.json").read_text())
    start, end = (datetime.fromisoformat(raw[k]).timestamp() for k in ("start", "end"))
    rng = np.random.default_rng(seed)
    out = []
    for t in np.arange(start, end - 1, 1.0):
        phase = "slow" if raw["faults"] and FAULT[0] <= t - start < FAULT[1] else "baseline"
        made = {lang: float(rng.uniform(380, 420)) for lang in LANGS}
        for lang, tokens in made.items():
            joules = j_per_token * (slow if phase == "slow" else 1.0) * tokens * math.exp(rng.normal(0, 0.02))
            out.append(
                {"start": float(t), "end": float(t) + 1, "target": TARGET, "lang": lang, "api": API, "phase": phase,
                 "energy_j": joules, "gpu_s": tokens / sum(made.values()), "tokens": tokens}
            )  # fmt: skip
    return out


def with_energy(src: Path, dst: Path, j_per_token: float, seed: int, source: str = "measured", **more: float) -> Path:
    """A copy of a run with energy blocks (`energy_blocks`) and the cost rows they add up to, as the load
    test writes them."""
    blocks = energy_blocks(src, j_per_token, seed, **more)
    rows = []
    for lang, phase in sorted({(b["lang"], b["phase"]) for b in blocks}):
        mine = [b for b in blocks if (b["lang"], b["phase"]) == (lang, phase)]
        joules, gpu_s, tokens = (sum(b[f] for b in mine) for f in ("energy_j", "gpu_s", "tokens"))
        usd = gpu_s / 3600 * PRICES["price_per_gpu_hour"] + joules / 3.6e6 * PRICES["price_per_kwh"]
        rows.append(
            {"lang": lang, "phase": phase, "source": source, "tokens": tokens, "requests": 2000, "energy_j": joules,
             "gpu_s": gpu_s, "j_per_token": joules / tokens, "j_per_request": joules / 2000, "usd": usd,
             "usd_per_mtok": usd / tokens * 1e6}
        )  # fmt: skip
    covered = (blocks[0]["start"], blocks[-1]["end"])
    energy = {"source": source, "origin": 'http://prometheus:9090 {Hostname="gpu-1"}', "gpus": ["GPU-1"],
              "method": "counter", "samples": len(blocks) // 3 + 1, "interval_s": 1.0, "covered": covered,
              "energy_j": sum(b["energy_j"] for b in blocks) + IDLE_J, "unattributed_j": IDLE_J,
              "gpu_s": covered[1] - covered[0], "blocks": blocks, **PRICES}  # fmt: skip
    return with_rows(src, dst, "cost", rows, energy=energy)


def with_absent(src: Path, dst: Path) -> Path:
    why = "NVML: no GPU on this host"
    rows = [{"lang": lang, "phase": "baseline", "source": "absent", "tokens": 30000, "requests": 2000, "why": why}
            for lang in LANGS]  # fmt: skip
    return with_rows(
        src, dst, "cost", rows, energy={"source": "absent", "origin": "http://sim:8000/metrics", "why": why}
    )


def cells(doc: dict, metric: str) -> dict[str, dict]:
    return {c["lang"]: c for c in doc["cells"] if c["metric"] == metric and c["phase"] == "baseline"}


def test_compare_calls_b_worse_when_its_tokens_cost_20_percent_more_energy(runs, tmp_path, capsys):
    a = with_energy(runs["a"], tmp_path / "a", 0.5, seed=1)
    b = with_energy(runs["b"], tmp_path / "b", 0.6, seed=2)
    r = llmchaos(capsys, "compare", str(a), str(b), "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    for c in cells(doc, "j_per_token").values():
        assert c["verdict"] == "worse", c
        assert c["unit"] == "J/token"
        assert 0.17 < c["rel_ci"][0] < c["rel"] < c["rel_ci"][1] < 0.23, c
        assert c["method"].startswith("block bootstrap")
    money = cells(doc, "usd_per_mtok")  # GPU time is most of the money here: +20 % energy is +1.4 %
    assert set(money) == set(LANGS)
    assert all(c["verdict"] == "no change" and c["unit"] == "$/Mtok" for c in money.values()), money
    assert "de J/token (baseline)" in llmchaos(capsys, "compare", str(a), str(b)).stdout


def test_compare_finds_no_change_where_the_tokens_cost_alike_and_its_figure_is_the_blocks(runs, tmp_path, capsys):
    a = with_energy(runs["a"], tmp_path / "a", 0.5, seed=1)
    b = with_energy(runs["b"], tmp_path / "b", 0.5, seed=2)
    r = llmchaos(capsys, "compare", str(a), str(b), "--json")
    assert r.returncode == 0, r.stderr
    got = cells(json.loads(r.stdout), "j_per_token")
    assert {c["verdict"] for c in got.values()} == {"no change"}
    blocks = json.loads((a / "run.json").read_text())["energy"]["blocks"]
    for lang, c in got.items():  # the comparison's blocks hold every interval: the totals are the run's
        mine = [x for x in blocks if x["lang"] == lang]
        assert c["a"] == pytest.approx(sum(x["energy_j"] for x in mine) / sum(x["tokens"] for x in mine), rel=1e-12)


def test_a_side_whose_energy_is_absent_or_of_another_source_is_shown_not_judged(runs, tmp_path, capsys):
    a = with_energy(runs["a"], tmp_path / "a", 0.5, seed=1)
    absent = with_absent(runs["b"], tmp_path / "absent")
    doc = json.loads(llmchaos(capsys, "compare", str(a), str(absent), "--json").stdout)
    for c in cells(doc, "j_per_token").values():
        assert (c["verdict"], c["p"], c["b"]) == ("inconclusive", None, None)
        assert c["reason"] == "B: its energy is absent (NVML: no GPU on this host)"
        assert c["a"] == pytest.approx(0.5, rel=0.02)
    modelled = with_energy(runs["b"], tmp_path / "modelled", 0.6, seed=2, source="modelled")
    r = llmchaos(capsys, "regress", "--baseline", str(a), "--current", str(modelled), "--json")
    assert r.returncode == 0, r.stdout[-2000:]  # 20 % more, but modelled against measured: not a regression
    for c in cells(json.loads(r.stdout), "j_per_token").values():
        assert (c["verdict"], c["p"]) == ("inconclusive", None)
        assert c["reason"] == "A: the sides' energy is not alike (A measured; B modelled): not compared"
        assert c["b"] / c["a"] == pytest.approx(1.2, rel=0.02)  # both figures shown


def test_regress_gates_j_per_token_by_its_rule(runs, tmp_path, capsys):
    a = with_energy(runs["a"], tmp_path / "a", 0.5, seed=1)
    b = with_energy(runs["b"], tmp_path / "b", 0.6, seed=2)
    r = regress(capsys, a, b, '"*": {j_per_token: {increase_pct: 10}}\n', "--json")
    assert r.returncode == 1, r.stdout[-2000:]
    doc = json.loads(r.stdout)
    assert {(c["lang"], c["metric"]) for c in doc["cells"] if c["verdict"] == "worse"} == {
        (lang, "j_per_token") for lang in LANGS
    }
    assert all(c["gated"] and c["rule"]["min_effect"] == pytest.approx(0.1) for c in cells(doc, "j_per_token").values())
    r = regress(capsys, a, b, '"*": {j_per_token: {increase_pct: 30}, usd_per_mtok: {increase_pct: 10}}\n')
    assert r.returncode == 0, r.stdout[-2000:]  # +20 % is within 30 %; $/Mtok moved 1.4 %
    r = llmchaos(capsys, "regress", "--baseline", str(a), "--current", str(b))  # no rule: shown, not gated
    assert r.returncode == 0, r.stdout[-2000:]
    (line,) = [line for line in r.stdout.splitlines() if "en J/token (baseline)" in line]
    assert line.startswith("worse ")
    assert line.endswith(" not gated")


def test_regress_history_follows_a_gated_j_per_token_over_the_nights(runs, tmp_path):
    folder = tmp_path / "history"
    nights = [with_energy(runs["a"], folder / f"n{i}", j, seed=i) for i, j in enumerate((0.5, 0.5, 0.6))]
    for night in nights:  # one run copied three times: the nights in their order by name
        doc = json.loads((night / "run.json").read_text())
        (night / "run.json").write_text(json.dumps({**doc, "run_id": night.name}))
    (tmp_path / "rules.yaml").write_text('"*": {j_per_token: {increase_pct: 10}}\n')
    past = history.load(folder, rules.load(str(tmp_path / "rules.yaml"), Settings()))
    (series,) = [s for s in past.series if s.name == "de j_per_token rate"]
    blocks = [json.loads((n / "run.json").read_text())["energy"]["blocks"] for n in nights]
    de = [[b for b in night if b["lang"] == "de"] for night in blocks]
    assert series.values == pytest.approx([sum(b["energy_j"] for b in x) / sum(b["tokens"] for b in x) for x in de])
    assert series.unit == ""  # a figure of its own, not milliseconds


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("j_per_token: {max_increase: 10%}", "*.j_per_token.max_increase: unknown field (known: increase_pct,"),
        ("usd_per_mtok: {percentiles: [p99]}", "*.usd_per_mtok.percentiles: usd_per_mtok is a rate: it has no"),
        ("j_per_token: {increase_ms: 5}", "*.j_per_token.increase_ms: j_per_token is not a latency: use increase_abs"),
        ("j_per_token: {increase_pct: -10}", "*.j_per_token.increase_pct: must be a number >= 0, got -10"),
    ],
)
def test_a_bad_cost_rule_is_one_line_naming_file_line_and_field_and_exit_2(runs, tmp_path, rule, message, capsys):
    a = runs["a"]
    r = regress(capsys, a, a, f'defaults: {{confidence: 0.99}}\n"*": {{{rule}}}\n')
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"llmchaos: error: {a.parent / 'rules.yaml'}:2: {message}"), r.stderr


def test_cost_cells_fall_in_the_block_of_their_middle_and_hold_only_the_run_s_targets():
    def block(start: float, lang: str, target: str = TARGET, **figures: float) -> run.EnergyBlock:
        return run.EnergyBlock(start=start, end=start + 1, target=target, lang=lang, api=API, phase="baseline",
                               **{"energy_j": 2.0, "gpu_s": 1.0, "tokens": 4.0, **figures})  # fmt: skip

    blocks = [block(0, "en"), block(9.8, "en", energy_j=6.0), block(-5, "en"), block(3, "de"), block(3, "en", "other")]
    energy = run.Energy(source="measured", blocks=blocks, price_per_kwh=0.36)  # 1e-7 $ per J, no price per GPU-hour
    rows = [run.Cost(target=TARGET, lang="en", api=API, phase="baseline", source="measured", tokens=12, requests=30)]
    made = cost.cells(_run(energy, rows), Blocks(0.0, 5.0, 2))
    j = made[CellKey("en", "j_per_token", "baseline")]
    assert isinstance(j, Ratio)
    assert (j.num.tolist(), j.den.tolist(), j.n, j.blocks) == ([4.0, 6.0], [8.0, 4.0], 30, 2)  # 10.3 s: the last
    usd = made[CellKey("en", "usd_per_mtok", "baseline")]
    assert isinstance(usd, Ratio)
    assert usd.exact == pytest.approx(10.0 * 1e-7 / 12 * 1e6)
    assert CellKey("de", "j_per_token", "baseline") in made
    assert not [k for k in made if k.lang == "other"]
    absent = cost.cells(_run(run.Energy(source="absent", why="no counter"), rows), Blocks(0.0, 5.0, 2))
    assert absent == {
        CellKey("en", m, "baseline"): Known({}, 30, "its energy is absent (no counter)")
        for m in ("j_per_token", "usd_per_mtok")
    }
    assert cost.cells(_run(None, rows), Blocks(0.0, 5.0, 2)) == {}


def _run(energy: run.Energy | None, rows: list[run.Cost]) -> run.Run:
    return run.Run(
        run_id="r", start=run.iso(0.0), end=run.iso(10.0), duration_s=10.0, command=[], config={}, targets=[TARGET],
        api=API, load_profile={}, seeds={}, host={}, generator={}, validity=run.Validity(valid=True), cost=rows,
        energy=energy,
    )  # fmt: skip
