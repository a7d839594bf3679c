"""run.json's `endings`, built in the master from what each worker's collector ships: the same rows as
one process that saw every request, only for keys where a request named its replica or KV way,
failed over or was stranded."""

from __future__ import annotations

import pytest

from llmchaos import run
from loadtests.collector import Collector
from loadtests.merge import Merged
from loadtests.record import RequestRecord


def req(phase: str = "baseline", lang: str = "en", target: str = "t", **kw) -> RequestRecord:
    return RequestRecord(lang, "openai-chat", target, phase=phase, **kw)


RECORDS = [
    req(replica="0", ttft=0.1, e2e=0.5, end_s=0.5, silent_s=0.1),
    req(replica="1", outcome="http_503", end_s=0.3, silent_s=0.3, failed_over=0),
    req(replica="1", ttft=0.2, e2e=0.6, end_s=0.6, silent_s=0.2, failed_over=2),
    req("partition", kv="failed", outcome="http_503", end_s=0.25, silent_s=0.25),
    req("partition", kv="failed", outcome="http_503", end_s=0.27, silent_s=0.27),
    req("partition", kv="recomputed", ttft=1.5, e2e=2.0, end_s=2.0, silent_s=1.5),
    req("partition", kv="timed_out", outcome="stranded", end_s=300.0, silent_s=300.0),
    req("partition", outcome="cancelled", at_stop=True, kv="timed_out"),  # the stop's, not the target's
    req("baseline", lang="de", silent_s=0.05),  # a plain server's: no row
]


def rows(records: list[RequestRecord], workers: int) -> list[run.Ending]:
    merged = Merged()
    collectors = [Collector({}, seed=0) for _ in range(workers)]
    for i, r in enumerate(records):
        collectors[i % workers].add(r)
    for c in collectors:
        merged.merge(c.drain(streaming=False))
    return merged.endings.rows()


def test_the_master_s_rows_from_its_workers_are_one_process_s():
    assert rows(RECORDS, 3) == rows(RECORDS, 1)


def test_each_row_counts_its_requests_replicas_failovers_and_kv_ways():
    by_phase = {e.phase: e for e in rows(RECORDS, 2)}
    assert set(by_phase) == {"baseline", "partition"}  # the de requests named nothing: no row
    base = by_phase["baseline"]
    assert (base.lang, base.requests, base.stranded, base.failed_over) == ("en", 3, 0, 1)
    assert base.silent_max_s == pytest.approx(0.3)
    assert {k: (r.requests, r.failed) for k, r in base.replicas.items()} == {"0": (1, 0), "1": (2, 1)}
    assert base.kv == {}
    part = by_phase["partition"]
    assert (part.requests, part.stranded, part.replicas) == (4, 1, {})  # the one cancelled at the stop is left out
    assert part.kv["failed"].requests == 2
    assert part.kv["failed"].ttft_p50_s is None  # no token
    assert part.kv["failed"].end_p50_s == pytest.approx(0.25, rel=0.01)
    assert part.kv["failed"].end_max_s == pytest.approx(0.27)
    assert part.kv["recomputed"].ttft_p50_s == pytest.approx(1.5, rel=0.01)
    assert part.kv["timed_out"].silent_max_s == part.kv["timed_out"].end_max_s == pytest.approx(300.0)


def test_a_run_against_a_plain_server_has_no_endings():
    assert rows([req(ttft=0.1, e2e=0.2, end_s=0.2, silent_s=0.1), req(outcome="http_500", end_s=0.01)], 2) == []


def test_one_target_s_part_has_only_its_rows():
    merged = Merged()
    c = Collector({}, seed=0)
    for r in (req(replica="0"), req(target="u", replica="1")):
        c.add(r)
    merged.merge(c.drain(streaming=False))
    assert [e.target for e in merged.side("u").endings.rows()] == ["u"]
