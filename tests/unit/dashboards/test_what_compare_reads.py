"""What compare and regress read of a run besides its requests: one error rate everywhere (requests the
end of the test cancelled are not issued, in the history as in compare), a run whose requests.jsonl
holds none of its requests (compared from its histograms and counts, saying what could not be), and
what differs between the runs (their configuration, a language only one side has)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path

import pytest

from benchmarks._synthetic_run import write
from dashboards.comparison import history, runs
from dashboards.comparison.flags import settings
from dashboards.comparison.rules import load as rules
from dashboards.comparison.sample import CellKey
from llmchaos.cli import main
from llmchaos.run import RequestLine


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


def cut_at_stop(path: Path, n: int, lang: str = "de", at_stop_in_rows: bool = True) -> Path:
    """`n` requests of `lang` the end of the test cancelled, added to the run as a load test writes them."""
    with open(path / "requests.jsonl", "ab") as f:
        for i in range(n):
            line = RequestLine(
                request_id=f"stop{i}", lang=lang, api="openai-chat", target="http://synthetic", phase="baseline",
                open_loop=False, intended=1.8e9 + 1, sent=1.8e9 + 1, schedule_lag=0.0, outcome="cancelled",
                at_stop=True,
            )  # fmt: skip
            f.write(line.encode() + b"\n")
    doc = json.loads((path / "run.json").read_text())
    row = {"target": "http://synthetic", "lang": lang, "api": "openai-chat", "phase": "baseline"}
    doc["outcomes"].append({**row, "outcome": "cancelled", "count": n, **({"at_stop": n} if at_stop_in_rows else {})})
    for s in doc["slo"]:
        if s["lang"] == lang:
            s["cancelled_at_stop"] = n
    (path / "run.json").write_text(json.dumps(doc))
    return path


def args() -> argparse.Namespace:
    """compare's statistics flags at their defaults."""
    return argparse.Namespace(
        alpha="0.05", correction="holm", min_effect="5%", min_abs="1ms", power="0.8", percentiles="p50,p90,p95,p99",
        resamples=50, seed=0,
    )  # fmt: skip


@pytest.mark.parametrize("rows_say", [True, False], ids=["at_stop in the outcome rows", "older run.json"])
def test_the_history_s_error_rate_is_compare_s(made, rows_say):
    folder = made / f"history-{rows_say}"
    for i in range(3):
        cut_at_stop(write(folder / f"n{i}", 400, seed=10 + i, run_id=f"n{i}"), 12, at_stop_in_rows=rows_say)
    past = history.load(folder, rules(None, settings(args())))
    (series,) = [s for s in past.series if s.name == "de error_rate rate"]
    compared = [
        runs.load(folder / f"n{i}").sample.cells[CellKey("de", "error_rate", "baseline")].exact for i in range(3)
    ]
    assert series.values == pytest.approx(compared)


def test_a_run_whose_requests_jsonl_holds_none_is_compared_from_its_histograms(made):
    a = write(made / "full", 6000, seed=1, drift=0.0)
    b = write(made / "none", 3000, seed=2, slowdown=1.5)
    (b / "requests.jsonl").write_text("")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["compare", str(a), str(b), "--json", "--resamples", "50"])
    assert status == 0, err.getvalue()
    doc = json.loads(out.getvalue())
    ttft = next(c for c in doc["cells"] if (c["lang"], c["metric"], c["stat"]) == ("de", "ttft", "p50"))
    assert ttft["b"] > 1.3 * ttft["a"]  # B's figure: its histograms'
    assert ttft["verdict"] == "inconclusive"
    assert ttft["reason"].startswith("B: no request of it in requests.jsonl to test with")
    assert {c["lang"] for c in doc["cells"] if c["metric"] == "error_rate"} == {"en", "de", "ja"}
    (note,) = [n for n in doc["notes"] if "requests.jsonl holds no request" in n]
    assert "SLO attainment and goodput per phase could not be computed" in note


def test_compare_says_how_the_runs_differ_and_which_language_it_left_out(made):
    a = write(made / "asked40", 1500, seed=3)
    b = write(made / "asked20", 1500, seed=4, langs=("en", "de"))
    doc = json.loads((b / "run.json").read_text())
    doc["config"]["max_tokens"] = 20
    (b / "run.json").write_text(json.dumps(doc))
    doc = json.loads((a / "run.json").read_text())
    doc["config"]["max_tokens"] = 40
    (a / "run.json").write_text(json.dumps(doc))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["compare", str(a), str(b), "--resamples", "50"])
    text = out.getvalue()
    assert "the runs differ in max_tokens: A 40; B 20" in text
    assert "ja: only in A, not compared" in text
