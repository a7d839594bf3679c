"""The load tests' streaming client against the scripted server's misbehaviours over real HTTP: each
request's outcome, and when the client gives up on it."""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import socket
import struct
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchaos.headers import REQUEST_ID_HEADER
from loadtests.adapters import ADAPTERS, Ask, Call
from loadtests.dataplane.response import Limits
from loadtests.record import RequestRecord
from loadtests.stream_client import StreamClient
from tests.servers import scripted
from tests.servers.accepting import Accepting

pytestmark = pytest.mark.usefixtures("each_plane")
FAST = {"ttft_ms": [5, 5], "itl_ms": [5, 5]}
LIMITS = Limits(connect=2.0, ttft=10.0, stall=10.0, request=20.0)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with scripted.running(seed=2) as u:
        yield u


def measure(url: str, limits: Limits = LIMITS, n: int = 6, **script: object) -> tuple[RequestRecord, float]:
    """One streamed chat request with `x_script` = FAST + `script`: its record, and how long the
    client took over it (seconds)."""
    adapter = ADAPTERS["openai-chat"]
    call = adapter.call(Ask("m", "en", "Tell me six things", n))
    body = json.loads(call.body) | {"x_script": FAST | script}
    rid = uuid.uuid4().hex
    rec = RequestRecord("en", adapter.name, url, request_id=rid)
    client = StreamClient(url, limits)
    start = time.perf_counter()
    try:
        client.run(
            adapter,
            Call(call.path, call.headers | {REQUEST_ID_HEADER: rid}, json.dumps(body).encode()),
            True,
            rec,
            start,
        )
        took = time.perf_counter() - start
    finally:
        client.close()
    return rec, took


def truth(url: str, rid: str) -> dict:
    """The server's record of a request: written before its answer ends, so a quiet machine has it at the
    first look; a starved server may take seconds to be asked."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for r in httpx.get(url + "/truth").json()["requests"]:
            if r["request_id"] == rid:
                return r
        time.sleep(0.02)
    raise AssertionError(f"no truth for {rid}")


# -- defect 13: the wait for the first token is TTFT, bounded by its own limit ------------------
# Each limit test bounds the time the client took by the next limit that would have fired were the
# one under test ignored (or by when the server would have gone on): a busy machine adds its delay to
# both, and never makes the one look like the other.
@pytest.mark.timing
def test_a_first_token_slower_than_the_stall_limit_is_ttft_not_a_stall(url):
    rec, took = measure(url, Limits(ttft=10.0, stall=0.5, request=20.0), ttft_ms=[1500, 1500])
    assert (rec.outcome, rec.error) == ("ok", None)
    assert rec.ttft is not None
    assert 1.5 <= rec.ttft <= took
    assert len(rec.chunks) == 6


@pytest.mark.timing
def test_no_first_token_within_the_ttft_timeout_is_its_own_outcome(url):
    rec, took = measure(url, Limits(ttft=0.5, stall=10.0, request=20.0), ttft_ms=[10_000, 10_000])
    assert rec.outcome == "ttft_timeout", rec.error
    assert rec.error == "no content within 0.5s"
    assert 0.5 <= took < 10.0  # given up at the limit, not at the stall or request limit
    assert rec.ttft is None


@pytest.mark.timing
def test_a_gap_between_events_over_the_stall_limit_is_still_a_stall(url):
    rec, took = measure(url, Limits(ttft=10.0, stall=0.5, request=20.0), mode="stall", after=2, seconds=10)
    assert rec.outcome == "stalled", rec.error
    assert len(rec.chunks) == 2
    assert took < 10.0  # before the server went on


# -- defect 14: headers late, a stream held open after its end, bytes that never end a line --------
@pytest.mark.timing
def test_headers_after_the_stall_limit_are_part_of_ttft(url):
    rec, _ = measure(url, Limits(connect=2.0, ttft=10.0, stall=0.5, request=20.0), mode="late_headers", seconds=1.5)
    assert (rec.outcome, rec.status) == ("ok", 200), rec.error
    assert rec.ttft is not None
    assert rec.ttft >= 1.5


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["hold_open", "done_then_comments"])
def test_a_stream_that_ended_is_ok_even_if_the_body_stays_open(url, mode):
    rec, took = measure(url, Limits(ttft=10.0, stall=10.0, request=30.0), mode=mode)
    assert (rec.outcome, rec.error) == ("ok", None)
    assert len(rec.chunks) == 6
    assert rec.e2e is not None
    assert took < 10.0  # the user goes on after a short drain: not the stall limit, not the run
    assert truth(url, rec.request_id)["disconnected"]  # the client left (a body never ending)


@pytest.mark.timing
def test_bytes_trickling_with_no_newline_are_cut_by_the_request_timeout(url):
    rec, took = measure(url, Limits(ttft=10.0, stall=10.0, request=1.5), mode="trickle", after=2, itl_ms=[50, 50])
    assert rec.outcome == "timeout", rec.error
    assert 1.5 <= took < 10.0


@pytest.mark.timing
def test_bytes_trickling_with_no_newline_are_no_event_for_the_stall_limit(url):
    rec, took = measure(url, Limits(ttft=10.0, stall=1.0, request=20.0), mode="trickle", after=2, itl_ms=[50, 50])
    assert rec.outcome == "stalled", rec.error
    assert 1.0 <= took < 20.0


# -- issue 33: how a request ended on a cluster: its silences, stranded, the router's headers ---------------
# Each silence is bounded below by the server's sleep and above by the time the client took over it (or,
# given up, by the limit it was given up at): no figure of the machine's speed.
SILENT = Limits(connect=2.0, ttft=10.0, stall=0.5, request=20.0)


@pytest.mark.timing
def test_a_long_wait_for_the_head_then_an_answer_is_ok_its_silence_the_wait(url):
    rec, took = measure(url, SILENT, mode="late_headers", seconds=1.0)
    assert rec.outcome == "ok", rec.error
    assert 1.0 <= rec.silent_s <= took
    assert rec.end_s == rec.e2e


@pytest.mark.timing
def test_an_error_status_after_the_stall_limit_without_a_byte_is_stranded(url):
    rec, took = measure(url, SILENT, mode="status", status=504, seconds=1.0)
    assert (rec.outcome, rec.status) == ("stranded", 504)
    assert "http_504" in str(rec.error)
    assert "scripted status 504" in str(rec.error)  # what the server said
    assert 1.0 <= rec.silent_s <= took
    assert rec.end_s is not None
    assert 1.0 <= rec.end_s <= took


@pytest.mark.timing
def test_an_error_status_at_once_is_its_own_outcome(url):
    rec, took = measure(url, SILENT, mode="status", status=503)
    assert rec.outcome == "http_503", rec.error
    assert rec.silent_s <= took


@pytest.mark.timing
def test_the_ttft_timeout_after_silence_is_stranded_silent_to_the_limit(url):
    rec, took = measure(url, Limits(connect=2.0, ttft=1.0, stall=0.5, request=20.0), mode="late_headers", seconds=5)
    assert rec.outcome == "stranded", rec.error
    assert "ttft_timeout" in str(rec.error)
    assert rec.send_s is not None
    assert 1.0 - rec.send_s - 0.1 <= rec.silent_s <= 1.0  # from its last byte sent to the limit
    assert rec.end_s == pytest.approx(1.0)
    assert took < 5.0


@pytest.mark.timing
def test_a_content_stream_gone_quiet_stays_stalled_silent_for_the_stall_limit(url):
    rec, _ = measure(url, SILENT, mode="stall", after=2, seconds=10)
    assert rec.outcome == "stalled", rec.error
    assert rec.silent_s == pytest.approx(SILENT.stall, abs=1e-3)  # from its last event's bytes to the limit


def test_the_router_s_headers_name_the_replica_its_failovers_and_the_kv_way(url):
    headers = {"x-llmchaos-replica": "2", "x-llmchaos-failover": "1", "x-llmchaos-kv": "recomputed"}
    rec, _ = measure(url, headers=headers)
    assert (rec.outcome, rec.replica, rec.failed_over, rec.kv) == ("ok", "2", 1, "recomputed")
    rec, _ = measure(url, Limits(replica_header="x-envoy-upstream-host"), headers={"x-envoy-upstream-host": "pod-a"})
    assert (rec.replica, rec.failed_over, rec.kv) == ("pod-a", 0, None)


# -- defect 15: valid SSE the client misread --------------------------------------------------------
@pytest.mark.parametrize("mode", ["ping", "cr", "bom"])
def test_valid_sse_in_every_form_is_read(url, mode):
    rec, _ = measure(url, mode=mode)
    assert (rec.outcome, rec.error) == ("ok", None)
    assert rec.text == " the quick brown fox jumps over"


def test_a_huge_event_is_read_whole(url):
    rec, _ = measure(url, mode="huge", after=2, size=2_000_000)
    assert (rec.outcome, rec.error) == ("ok", None)
    assert [len(c) for c in rec.chunks] == [4, 6, 1_999_998, 4, 6, 5]


# -- defect 28: a stream whose first token is EOS -----------------------------------------------
def test_a_stream_ended_before_any_text_is_ok_with_no_ttft(url):
    rec, _ = measure(url, mode="eos_first")
    assert (rec.outcome, rec.error) == ("ok", None)
    assert (rec.ttft, rec.chunks, rec.usage_tokens) == (None, [], 1)
    assert rec.e2e is not None


# -- what stays as it was ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("script", "outcome"),
    [
        ({"mode": "cut"}, "truncated"),
        ({"mode": "no_done"}, "truncated"),
        ({"mode": "garbage"}, "malformed"),
        ({"mode": "bad_json"}, "malformed"),
        ({"mode": "status", "status": 429}, "rate_limited"),
        ({"mode": "never_ending"}, "timeout"),
    ],
)
def test_misbehaviours_keep_their_outcomes(url, script, outcome):
    rec, _ = measure(url, Limits(ttft=10.0, stall=10.0, request=1.0 if outcome == "timeout" else 20.0), **script)
    assert rec.outcome == outcome, rec.error


def test_the_connection_is_reused_after_a_whole_response(url):
    client = StreamClient(url, LIMITS)
    adapter = ADAPTERS["openai-chat"]
    call = adapter.call(Ask("m", "en", "x", 3))
    body = json.dumps(json.loads(call.body) | {"x_script": FAST}).encode()
    for _ in range(3):
        rec = RequestRecord("en", adapter.name, url)
        client.run(adapter, Call(call.path, call.headers, body), True, rec, time.perf_counter())
        assert rec.outcome == "ok"
    client.close()
    assert client.connections == 1


# -- fuzz: the client's outcome for a generated stream, from a raw socket server -------------------
class RawServer(Accepting):
    """Answers each connection, once its request is in, with the next queued response: the head, then
    each piece written on its own; then a clean close, or an abort (RST) when `cut`."""

    def __init__(self) -> None:
        self.responses: queue.Queue[tuple[list[bytes], bool]] = queue.Queue()
        super().__init__()

    def answer(self, conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(65536)
        pieces, cut = self.responses.get(timeout=10)
        with contextlib.suppress(OSError):
            for p in pieces:
                conn.sendall(p)
            if cut:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.fixture(scope="module")
def raw() -> Iterator[RawServer]:
    server = RawServer()
    yield server
    server.close()


def chunk(obj: dict) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, **obj}]})


NOISE = [": keep-alive", "event: ping", "data:", chunk({"delta": {"role": "assistant", "content": ""}})]
BAD = {  # an event a stream may carry, and the outcome it makes
    "data: " + json.dumps({"error": {"message": "boom", "code": 500}}): "http_500",
    'data: {"choices": [}': "malformed",
    "data: \udcff": "malformed",  # a lone surrogate: written as invalid UTF-8 below
}


@st.composite
def misbehaving_streams(draw: st.DrawFn) -> tuple[list[bytes], bool, str, str]:
    """(the response's pieces, cut, the outcome, the text): events of text and noise, maybe one bad
    event, ended by [DONE], by the body's end, or cut; one line end throughout, maybe a BOM first."""
    events = [(chunk({"delta": {"content": t}}), t) for t in draw(st.lists(st.text(max_size=6), max_size=8))]
    for noise in draw(st.lists(st.sampled_from(NOISE), max_size=4)):
        events.insert(draw(st.integers(0, len(events))), (noise, ""))
    ending = draw(st.sampled_from(["done", "eof", "cut"]))
    outcome, text = {"done": "ok", "eof": "truncated", "cut": "truncated"}[ending], "".join(t for _, t in events)
    bad = draw(st.none() | st.sampled_from(sorted(BAD)))
    if bad is not None:
        at = draw(st.integers(0, len(events)))
        outcome, text = BAD[bad], "".join(t for _, t in events[:at])
        events.insert(at, (bad, ""))
    if ending == "done":
        events += [(chunk({"delta": {}, "finish_reason": "stop"}), ""), ("data: [DONE]", "")]
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    body = draw(st.sampled_from(["", "\ufeff"])) + "".join(line + eol + eol for line, _ in events)
    raw_body = body.encode("utf-8", "surrogateescape")
    cuts = sorted(draw(st.lists(st.integers(0, len(raw_body)), max_size=6)))
    parts = [raw_body[a:b] for a, b in itertools.pairwise([0, *cuts, len(raw_body)]) if b > a]
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    pieces = [head, *(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)]
    if ending != "cut":
        pieces.append(b"0\r\n\r\n")
    return pieces, ending == "cut", outcome, text


@pytest.mark.fuzz
@given(case=misbehaving_streams())
def test_any_stream_is_measured_and_classified(raw, case):
    pieces, cut, outcome, text = case
    raw.responses.put((pieces, cut))
    adapter = ADAPTERS["openai-chat"]
    rec = RequestRecord("en", adapter.name, raw.url)
    client = StreamClient(raw.url, Limits(connect=2.0, ttft=5.0, stall=5.0, request=10.0))
    try:
        client.run(adapter, adapter.call(Ask("m", "en", "x", 8)), True, rec, time.perf_counter())
    finally:
        client.close()
    assert (rec.outcome, rec.text) == (outcome, text), rec.error
    assert (rec.ttft is not None) == bool(text)
    assert len(rec.gaps) == max(0, len(rec.chunks) - 1)
