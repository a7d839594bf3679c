"""The load tests' streaming client against the scripted server's misbehaviours over real HTTP: each
request's outcome, and when the client gives up on it."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import gevent
import httpx
import pytest

from llmchaos.wire import REQUEST_ID_HEADER
from loadtests.adapters import ADAPTERS, Call
from loadtests.client import Limits, StreamClient
from loadtests.record import RequestRecord
from tests.servers import scripted

pytestmark = pytest.mark.integration

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
    call = adapter.call("m", "Tell me six things", "en", n, True, False, None)
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
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for r in httpx.get(url + "/truth").json()["requests"]:
            if r["request_id"] == rid:
                return r
        time.sleep(0.02)
    raise AssertionError(f"no truth for {rid}")


# -- defect 13: the wait for the first token is TTFT, bounded by its own limit ------------------
def test_a_first_token_slower_than_the_stall_limit_is_ttft_not_a_stall(url):
    rec, _ = measure(url, Limits(ttft=10.0, stall=0.5, request=20.0), ttft_ms=[1500, 1500])
    assert (rec.outcome, rec.error) == ("ok", None)
    assert rec.ttft is not None
    assert 1.5 <= rec.ttft < 2.5
    assert len(rec.chunks) == 6


def test_no_first_token_within_the_ttft_timeout_is_its_own_outcome(url):
    rec, took = measure(url, Limits(ttft=0.5, stall=10.0, request=20.0), ttft_ms=[3000, 3000])
    assert rec.outcome == "ttft_timeout", rec.error
    assert rec.error == "no content within 0.5s"
    assert 0.5 <= took < 2.0  # given up at the limit, not at the stall or request limit
    assert rec.ttft is None


def test_a_gap_between_events_over_the_stall_limit_is_still_a_stall(url):
    rec, took = measure(url, Limits(ttft=10.0, stall=0.5, request=20.0), mode="stall", after=2, seconds=3)
    assert rec.outcome == "stalled", rec.error
    assert len(rec.chunks) == 2
    assert took < 2.0


# -- defect 14: headers late, a stream held open after its end, bytes that never end a line --------
def test_headers_after_the_stall_limit_are_part_of_ttft(url):
    rec, _ = measure(url, Limits(connect=2.0, ttft=10.0, stall=0.5, request=20.0), mode="late_headers", seconds=1.5)
    assert (rec.outcome, rec.status) == ("ok", 200), rec.error
    assert rec.ttft is not None
    assert rec.ttft >= 1.5


@pytest.mark.parametrize("mode", ["hold_open", "done_then_comments"])
def test_a_stream_that_ended_is_ok_even_if_the_body_stays_open(url, mode):
    rec, took = measure(url, Limits(ttft=10.0, stall=3.0, request=30.0), mode=mode)
    assert (rec.outcome, rec.error) == ("ok", None)
    assert len(rec.chunks) == 6
    assert rec.e2e is not None
    assert took < 3.0  # the user goes on after a short drain: not the stall limit, not the run
    assert truth(url, rec.request_id)["disconnected"]  # the client left (a body never ending)


def test_bytes_trickling_with_no_newline_are_cut_by_the_request_timeout(url):
    rec, took = measure(url, Limits(ttft=10.0, stall=10.0, request=1.5), mode="trickle", after=2, itl_ms=[50, 50])
    assert rec.outcome == "timeout", rec.error
    assert 1.5 <= took < 3.0


def test_bytes_trickling_with_no_newline_are_no_event_for_the_stall_limit(url):
    rec, took = measure(url, Limits(ttft=10.0, stall=1.0, request=20.0), mode="trickle", after=2, itl_ms=[50, 50])
    assert rec.outcome == "stalled", rec.error
    assert 1.0 <= took < 2.5


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
    rec, _ = measure(url, Limits(ttft=2.0, stall=1.0, request=1.0), **script)
    assert rec.outcome == outcome, rec.error


def test_the_connection_is_reused_after_a_whole_response(url):
    client = StreamClient(url, LIMITS)
    adapter = ADAPTERS["openai-chat"]
    call = adapter.call("m", "x", "en", 3, True, False, None)
    body = json.dumps(json.loads(call.body) | {"x_script": FAST}).encode()
    socks = []
    for _ in range(3):
        rec = RequestRecord("en", adapter.name, url)
        client.run(adapter, Call(call.path, call.headers, body), True, rec, time.perf_counter())
        assert rec.outcome == "ok"
        socks.append(id(client._http._connection_pool._socket_queue.queue[0]))
    client.close()
    assert len(set(socks)) == 1
    gevent.sleep(0)
