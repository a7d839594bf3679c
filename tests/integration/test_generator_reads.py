"""The load tests' client counts its coalesced reads (several content events under one kernel
receive stamp) against a real server: two events in one write are one coalesced read; events
written far apart are none. A run adds them up in run.json, per phase, and prints them at its end;
only reads the generator took late (the kernel had held them) count against its validity, by the
error bar they leave on TTFT and ITL (llmchaos/bounds.py), held to a server's known gaps."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from llmchaos.headers import REQUEST_ID_HEADER
from llmchaos.histogram import nearest_rank
from loadtests.adapters import ADAPTERS, Call
from loadtests.dataplane.response import LATE_S, Limits
from loadtests.record import RequestRecord
from loadtests.selfwatch import CPU_LIMIT
from loadtests.stream_client import StreamClient
from tests.integration.loadtest_helpers import distributed, locust, only_run
from tests.integration.test_sse_proxy import proxy
from tests.noise import WakeNoise
from tests.servers import raw_upstream, scripted

pytestmark = pytest.mark.usefixtures("each_plane")
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


@pytest.mark.timing  # each write its own read: 30 ms apart, read on time
def test_an_event_read_with_bytes_that_came_after_it_shares_their_stamp(upstream):
    # one event and a comment in a write, one and the start of the next, the next's rest, one alone
    c = event("c")
    rec = read(upstream.url, [event("a") + ": ping\n\n", event("b") + c[:10], c[10:], event("d"), "data: [DONE]\n\n"])
    assert rec.chunks == ["a", "b", "c", "d"]
    assert (rec.reads, rec.coalesced_reads) == (4, 0)  # one content event a read
    # a and b carry the stamp of bytes after them: uncertain by their reads' bounds; c and d are exact
    assert [(first, n) for first, n, _ in rec.late_spans] == [(0, 1), (1, 1)]
    assert all(0 < late < 1 for _, _, late in rec.late_spans)


@pytest.mark.timing
def test_events_written_far_apart_are_no_coalesced_read(upstream):
    rec = read(upstream.url, [event("a"), event("b"), event("c"), event("d"), "data: [DONE]\n\n"])
    assert rec.chunks == ["a", "b", "c", "d"]
    assert (rec.reads, rec.coalesced_reads) == (4, 0)
    assert min(rec.gaps) > 0.0


@pytest.mark.parametrize("mode", ["one process", "master and two workers"])
def test_a_run_counts_its_coalesced_reads_per_phase(tmp_path, mode, each_plane):
    # No gap between events: they are written back to back and read several at a time; the run
    # counts them (per request in requests.jsonl, per phase and per process in run.json) and prints
    # them; a master adds up its workers' counts. (Whether the generator kept up with a server this
    # fast is the machine's: the validity is tested below, with a generator idle and one overloaded.)
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
    assert sum(r["late_reads"] for r in requests) == reads["late"]
    assert [(p["phase"], p["reads"], p["coalesced"]) for p in reads["phases"]] == [
        ("baseline", reads["reads"], reads["coalesced"])
    ]
    procs = run["generator"]
    assert len(procs) == (1 if mode == "one process" else 2)
    assert sum(p["coalesced_reads"] for p in procs.values()) == reads["coalesced"]
    assert {p["plane"] for p in procs.values() if p["reads"]} == {each_plane}  # each process says which read
    assert "events the network delivered together, share of reads by phase: baseline " in proc.stdout + proc.stderr
    # events read several at once leave an error bar, its samples added up from every process: ITL's
    # in the baseline phase is not a point
    itl = next(
        b for b in run["validity"]["bounds"] if (b["metric"], b["percentile"], b["phase"]) == ("itl", 99.0, "baseline")
    )
    assert itl["uncertain"] > 0, itl
    assert itl["low_ms"] < itl["high_ms"], itl


SCHEDULE = """seed: 1
faults:
  - name: held-burst
    kind: sse
    target: {{proxy: "{proxy}"}}
    at: 1s
    duration: 30s
    params: {{hold: 0.15}}
"""


@pytest.mark.timing
def test_a_proxy_hold_bursts_events_and_an_idle_generator_stays_valid(tmp_path):
    # Defect 4 of issue 18: the proxy holds each stream's events 150 ms, then lets them go at once;
    # the generator, nearly idle, read them as they came, several to a read, and called itself
    # INVALID for it. Now the burst is counted in the window's phase as the stream's, and the run is
    # valid wherever the machine lets the generator read on time.
    with scripted.running(3, "--itl-ms", "5", "5") as url, proxy(url) as p:
        (tmp_path / "schedule.yaml").write_text(SCHEDULE.format(proxy=p.split("//")[1]))
        with WakeNoise() as noise:
            proc = locust(
                "--host", p, "--results-dir", str(tmp_path / "results"), "-u", "4", "-r", "4", "-t", "9s",
                "--langs", "en", "--max-tokens", "60", "--schedule", str(tmp_path / "schedule.yaml"),
                "--fault-journal", str(tmp_path / "journal.json"),
            )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, _ = only_run(tmp_path / "results")
    held = next(x for x in run["reads"]["phases"] if x["phase"] == "held-burst")
    figures = (run["reads"], run["generator"], run["validity"], noise.p95, noise.over_1ms, noise.worst)
    assert held["reads"] >= 300, figures
    # several events to a read, taken on time: the stream's batching, over the limit the old check
    # held against the generator (it said INVALID here)
    assert (held["coalesced"] - held["late"]) / held["reads"] > 0.0075, figures  # the old check's limit
    assert run["generator"]["local"]["cpu_mean"] < CPU_LIMIT, figures
    assert not any(f.startswith("reads_coalesced") for f in run["validity"]["flags"]), figures
    assert {(b["metric"], b["percentile"]) for b in run["validity"]["bounds"]} >= {("ttft", 99.0), ("itl", 99.0)}
    assert "the generator's error bar" in proc.stdout + proc.stderr
    # a machine that woke a process 1 ms late or more (LATE_S) less often than the generator's limit on
    # late reads allows: the generator's reads are on time (a p95 under 1 ms said nothing of the 0.75 %)
    assert LATE_S == 0.001  # what over_1ms counts
    if noise.over_1ms < 0.0075 / 2:
        assert run["validity"]["valid"], figures
    else:  # a busy one delays the generator's reads too; what it holds against it is lateness only
        assert set(run["validity"]["flags"]) <= {"bound_material:en", "generator_saturated:local"}, figures


def test_a_generator_overloaded_by_its_own_process_is_still_invalid(tmp_path, each_plane):
    # The check can still fail: a thread of the generator's own process holds the interpreter ~10 ms
    # at a time, so the events of a stream wait in the kernel and are read late, several at a time,
    # and the error bar that leaves on TTFT and ITL is material.
    with scripted.running(3, "--itl-ms", "2", "2") as url:
        proc = locust(
            "--host", url, "--results-dir", str(tmp_path), "-u", "4", "-r", "4", "-t", "6s",
            "--langs", "en", "--max-tokens", "100", file="tests/integration/hogged_locustfile.py",
        )  # fmt: skip
        truth = httpx.get(f"{url}/truth").json()["requests"]  # when the server really wrote each event
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, _ = only_run(tmp_path)
    v = run["validity"]
    assert not v["valid"]
    assert "bound_material:en" in v["flags"], v  # the error bar its late reads left is wide
    # the ground truth: the server wrote an event every 2 ms (on a busy machine some later, then the next
    # sooner: it logs each write), which the hogged generator read several at once (ITL p50 near
    # nothing); the true median lies within the bound it states
    gaps = [g * 1000 for r in truth if not r["disconnected"] and r["status"] == 200 for g in r["gaps_s"]]
    true_p50 = nearest_rank(gaps, 50.0)
    itl = next(b for b in v["bounds"] if (b["metric"], b["percentile"], b["phase"]) == ("itl", 50.0, None))
    assert itl["low_ms"] * 0.999 <= true_p50 <= itl["high_ms"] * 1.001 <= true_p50 + 3 * 10, (itl, true_p50)
    assert any(line.startswith("en itl p50 ") and "could be" in line for line in v["reasons"]), v
    assert "INVALID RUN: " in proc.stdout + proc.stderr
