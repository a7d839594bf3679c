"""A run's requests as columns, built at once for millions of requests: each request's flags and
values equal what the core computes for that one request line."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks._synthetic_run import write
from dashboards.comparison.columns import read
from llmchaos import run, slo


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> run.RunResults:
    # a fault window triples latencies for a while, so some requests miss their SLO and some fail
    return run.load(write(tmp_path_factory.mktemp("run") / "r", 3000, seed=4, failures=0.05, fault=(5.0, 9.0)))


def test_every_request_flag_is_the_one_the_core_gives_that_request(results):
    cols = read(results.run, results.requests())
    limits = {row.lang: {c.slo: c.threshold_ms for c in row.checks} for row in results.run.slo}
    lines = [r for r in results.requests() if not r.at_stop]
    failed, met = [], []
    for r in lines:
        ok = r.outcome == "ok"
        tpot = (r.e2e - r.ttft) / (r.output_tokens - 1) if ok and r.ttft is not None and r.e2e is not None else None
        failed.append(0.0 if ok else 1.0)
        met.append(
            slo.attained(limits[r.lang], ok=ok, ttft=r.ttft, e2e=r.e2e, tpot=tpot, max_gap=max(r.gaps, default=0))
        )
    t, v, w, c = cols.requests.arrays()
    assert np.array_equal(v, failed)
    assert np.array_equal(w.astype(bool), met)
    assert 0 < sum(met) < sum(not f for f in failed)  # the fault made some successful requests miss
    assert [cols.cells[i][0] for i in c] == [r.lang for r in lines]
    assert np.array_equal(t, [r.intended for r in lines])


def test_values_per_metric_and_itl_weighted_by_tokens_per_event(results):
    cols = read(results.run, results.requests())
    ok = [r for r in results.requests() if r.outcome == "ok" and not r.at_stop]
    _, ttft, _, _ = cols.metrics["ttft"].arrays()
    assert np.array_equal(ttft, [r.ttft for r in ok])
    _, gaps, gap_w, _ = cols.metrics["inter_chunk"].arrays()
    assert np.array_equal(gaps, [g for r in ok for g in r.gaps])
    assert (gap_w == 1).all()
    _, itl, itl_w, _ = cols.metrics["itl"].arrays()
    per_event = [max(1.0, r.output_tokens / (len(r.gaps) + 1)) for r in ok for _ in r.gaps]
    assert np.allclose(itl * itl_w, gaps)
    assert np.array_equal(itl_w, per_event)
    assert sum(cols.outcomes.values()) == results.run.requests.written


def test_time_to_first_answer_and_thinking_tokens_are_columns_of_their_own(results):
    """A reasoning model's requests: their time to answer and thinking tokens (none for one that did not think)."""
    base = {"lang": "en", "api": "openai-chat", "target": "t", "phase": "baseline", "open_loop": False}
    lines = [
        run.RequestLine(
            request_id=str(i),
            **base,
            intended=100.0 + i,
            sent=100.0 + i,
            schedule_lag=0.0,
            outcome="ok",
            ttft=0.1,
            ttfa=0.1 + 0.2 * think,
            e2e=1.0,
            gaps=[0.1] * 9,
            output_tokens=10,
            reasoning_tokens=think or None,
        )
        for i, think in enumerate((0, 3, 5))
    ]
    cols = read(results.run, lines)
    assert np.allclose(cols.metrics["ttfa"].v, [0.1, 0.7, 1.1])
    assert np.array_equal(cols.metrics["reasoning_tokens"].v, [3, 5])
    assert np.array_equal(cols.metrics["reasoning_tokens"].t, [101.0, 102.0])
