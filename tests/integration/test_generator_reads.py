"""The load tests' client counts its coalesced reads (several content events under one kernel
receive stamp) against a real server: two events in one write are one coalesced read; events
written far apart are none. A run adds them up in run.json and prints them at its end."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from llmchaos.headers import REQUEST_ID_HEADER
from loadtests.adapters import ADAPTERS, Call
from loadtests.dataplane.request import Limits
from loadtests.record import RequestRecord
from loadtests.stream_client import StreamClient
from tests.integration.loadtest_helpers import distributed, locust, only_run
from tests.servers import raw_upstream, scripted

HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {n}\r\nconnection: close\r\n\r\n"


def event(text: str) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n"


@pytest.fixture(scope="module")
def upstream() -> Iterator[raw_upstream.RawUpstream]:
    with raw_upstream.running() as server:
        yield server


def read(url: str, writes: list[str]) -> RequestRecord:
    """One streamed request to the raw upstream's /script, answered by `writes` (each its own
    write, 30 ms apart; the head goes with the first)."""
    body = "".join(writes)
    pieces = [HEAD.format(n=len(body.encode())) + writes[0], *writes[1:]]
    adapter = ADAPTERS["openai-chat"]
    rec = RequestRecord("en", adapter.name, url, request_id="r")
    client = StreamClient(url, Limits(connect=2.0, ttft=5.0, stall=5.0, request=10.0))
    script = json.dumps({"pieces": pieces, "gap_s": 0.03}).encode()
    try:
        client.run(adapter, Call("/script", {REQUEST_ID_HEADER: "r"}, script), True, rec, time.perf_counter())
    finally:
        client.close()
    assert rec.outcome == "ok", rec.error
    return rec


def test_two_events_in_one_write_are_one_coalesced_read(upstream):
    rec = read(upstream.url, [event("a") + event("b"), event("c"), event("d") + "data: [DONE]\n\n"])
    assert rec.chunks == ["a", "b", "c", "d"]
    assert (rec.reads, rec.coalesced_reads) == (3, 1)
    assert rec.gaps[0] == 0.0  # the cost: one stamp for both


@pytest.mark.timing
def test_events_written_far_apart_are_no_coalesced_read(upstream):
    rec = read(upstream.url, [event("a"), event("b"), event("c"), event("d"), "data: [DONE]\n\n"])
    assert rec.chunks == ["a", "b", "c", "d"]
    assert (rec.reads, rec.coalesced_reads) == (4, 0)
    assert min(rec.gaps) > 0.0


@pytest.mark.parametrize("mode", ["one process", "master and two workers"])
def test_a_run_counts_its_coalesced_reads_and_a_run_of_them_is_invalid(tmp_path, mode):
    # No gap between events: they are written back to back and read several at a time; the run is
    # invalid (its ITL is the reads', not the server's), says why, and prints its reads; a master
    # adds up its workers' counts.
    with scripted.running(3, "--itl-ms", "0", "0") as url:
        args = ("--host", url, "--results-dir", str(tmp_path), "-u", "4", "-r", "4", "-t", "3s")
        args += ("--langs", "en", "--max-tokens", "200")
        proc = locust(*args) if mode == "one process" else distributed(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    reads = run["reads"]
    assert 0 < reads["coalesced"] <= reads["reads"] < sum(200 for r in requests if r["outcome"] == "ok")
    assert sum(r["coalesced_reads"] for r in requests) == reads["coalesced"]  # per request in requests.jsonl
    assert sum(r["reads"] for r in requests) == reads["reads"]
    procs = run["generator"]
    assert len(procs) == (1 if mode == "one process" else 2)
    assert sum(p["coalesced_reads"] for p in procs.values()) == reads["coalesced"]
    assert any(f.startswith("reads_coalesced:") for f in run["validity"]["flags"])
    assert any("under one stamp" in r for r in run["validity"]["reasons"])
    assert f"stream reads: {reads['reads']}, {reads['coalesced']} coalesced" in proc.stderr
    assert "INVALID RUN" in proc.stderr
    assert "under one stamp" in proc.stderr
