"""The summary's cost lines: every figure the run has, the reason where it has none, never a crash
on a run.json whose energy says less than the load test writes."""

from __future__ import annotations

import pytest

from benchmarks._synthetic_run import write
from llmchaos import run
from llmchaos.histogram import HistogramSet
from llmchaos.run.table import cost_lines, ending_lines, table


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> run.Run:
    return run.load(write(tmp_path_factory.mktemp("runs") / "r", 50, seed=1)).run


def cost(lang: str, j: float | None, usd: float | None = None) -> run.Cost:
    return run.Cost(
        target="t", lang=lang, api="openai-chat", phase="baseline", source="modelled", tokens=1000, requests=10,
        energy_j=None if j is None else j * 1000, j_per_token=j, j_per_request=None if j is None else j * 100,
        usd_per_mtok=usd, why=None if j is not None else "none of its tokens were produced within the energy readings",
    )  # fmt: skip


def test_a_run_without_energy_prints_no_cost(made):
    assert cost_lines(made) == []


def test_each_language_and_phase_is_printed_and_a_missing_figure_says_why(made):
    energy = run.Energy(
        source="modelled", origin="http://s/metrics", gpus=("GPU-sim",), method="counter", interval_s=1.0,
        energy_j=312.5, unattributed_j=2.5,
    )  # fmt: skip
    lines = cost_lines(made.model_copy(update={"energy": energy, "cost": [cost("en", 0.3125, 1.5), cost("de", None)]}))
    assert lines == [
        "cost (modelled, 312.5 J of 1 GPU(s) by counter, read every 1 s, from http://s/metrics; 2.5 J in intervals "
        "with no token):",
        "  en baseline: 0.312 J/token, 31.2 J/request, $1.50/Mtok",
        "  de baseline: - (none of its tokens were produced within the energy readings)",
    ]


def test_an_absent_source_is_one_line_with_why_and_a_sparse_one_never_a_crash(made):
    absent = run.Energy(source="absent", origin="x", why="no series matching the selector")
    assert cost_lines(made.model_copy(update={"energy": absent})) == ["cost: absent (no series matching the selector)"]
    sparse = run.Energy(source="measured", origin="x")  # what a hand-written run.json may hold
    assert cost_lines(made.model_copy(update={"energy": sparse})) == ["cost (measured, energy of 0 GPU(s), from x):"]


def test_a_run_without_endings_prints_none_and_one_with_them_a_line_per_phase_and_language(made):
    assert ending_lines(made) == []
    assert "endings" not in table(made, HistogramSet())
    kv = run.KvEnding(requests=3, ttft_p50_s=None, end_p50_s=300.0, end_max_s=301.0, silent_max_s=300.0)
    rows = [
        run.Ending(target="t", lang="en", api="openai-chat", phase=phase, requests=10, stranded=stranded,
                   failed_over=failed_over, silent_max_s=silent, replicas=replicas,
                   kv={"timed_out": kv} if stranded else {})
        for phase, stranded, failed_over, silent, replicas in (
            ("partition", 3, 0, 300.0, {}),
            ("baseline", 0, 1, 0.2, {"0": run.ReplicaEnding(requests=6, failed=0),
                                     "1": run.ReplicaEnding(requests=4, failed=1)}),
        )
    ]  # fmt: skip
    assert ending_lines(made.model_copy(update={"endings": rows})) == [
        "endings (stranded: no byte for the stall limit before any content, then no answer):",
        "  baseline en: 10 requests, 0 stranded, 1 failed over, silent up to 0.2 s; replica 0 6, 1 4 (1 failed)",
        "  partition en: 10 requests, 3 stranded, 0 failed over, silent up to 300 s; kv timed_out 3 (ttft p50 -, "
        "end p50 300 s, max 301 s, silent up to 300 s)",
    ]
