"""How an exchange ended, as the data plane hands over its reads (bytes, the kernel's receive stamp):
the longest silence, when it ended, the cluster's headers, and `stranded` (no byte for the stall
limit before any content, then no answer)."""

from __future__ import annotations

import json

import pytest

from loadtests.adapters import ADAPTERS
from loadtests.dataplane.request import Exchange
from loadtests.dataplane.response import Limits
from loadtests.record import RequestRecord

LIMITS = Limits(connect=1.0, ttft=10.0, stall=2.0, request=20.0)
SSE = b"content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"


def head(status: int = 200, extra: bytes = b"", sse: bool = True) -> bytes:
    return b"HTTP/1.1 %d X\r\n%s%s\r\n" % (status, SSE if sse else b"content-length: 7\r\n", extra)


def chunk(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body)


def event(text: str) -> bytes:
    return chunk(("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n").encode())


DONE = chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def exchange(limits: Limits = LIMITS) -> Exchange:
    """An exchange due at 100.0, its request written at 100.0."""
    ex = Exchange(
        ADAPTERS["openai-chat"], b"", True, RequestRecord("en", "openai-chat", "t"), 100.0, limits, lambda: None
    )
    ex.written(100.0, 100.0)
    return ex


def test_the_longest_silence_is_from_the_send_to_the_first_byte_or_between_two_reads():
    ex = exchange()
    ex.received(head(), 100.5)  # the head alone: a byte, no content
    ex.received(event("a"), 100.75)
    ex.received(chunk(b": keep-alive\n\n"), 101.5)  # a comment is a byte from the server too
    ex.received(event("b"), 102.5)
    ex.received(DONE, 102.6)
    rec = ex.rec
    assert rec.outcome == "ok"
    assert rec.silent_s == pytest.approx(1.0)
    assert rec.end_s == rec.e2e == pytest.approx(2.6)
    assert rec.line().silent_s == rec.silent_s


def test_a_long_wait_that_then_answers_is_ok_a_slow_first_token():
    ex = exchange()
    ex.received(head() + event("a"), 105.0)
    ex.received(DONE, 105.1)
    assert (ex.rec.outcome, ex.rec.ttft) == ("ok", pytest.approx(5.0))
    assert ex.rec.silent_s == pytest.approx(5.0)


def test_an_error_status_after_the_stall_limit_without_a_byte_is_stranded_and_keeps_what_the_server_said():
    ex = exchange()
    ex.received(head(504, sse=False) + b"timeout", 104.0)
    rec = ex.rec
    assert (rec.outcome, rec.status) == ("stranded", 504)
    assert "http_504" in str(rec.error)
    assert "timeout" in str(rec.error)
    assert rec.silent_s == pytest.approx(4.0)
    assert rec.end_s == pytest.approx(4.0)


def test_an_error_status_sooner_is_its_own_outcome():
    ex = exchange()
    ex.received(head(503, sse=False) + b"go away", 100.25)
    assert (ex.rec.outcome, ex.rec.error) == ("http_503", "go away")
    assert ex.rec.end_s == pytest.approx(0.25)


def test_the_ttft_timeout_after_silence_is_stranded_and_its_silence_runs_to_the_limit():
    ex = exchange()
    ex.expire(110.5)  # the plane's timer fires late; the request was given up at its limit
    rec = ex.rec
    assert rec.outcome == "stranded"
    assert "ttft_timeout" in str(rec.error)
    assert rec.silent_s == pytest.approx(10.0)
    assert rec.end_s == pytest.approx(10.0)


def test_bytes_that_are_no_content_keep_a_request_from_being_stranded():
    ex = exchange()
    ex.received(head(), 100.1)
    for t in range(1, 10):
        ex.received(chunk(b": ping\n\n"), 100.1 + t)
    ex.expire(110.0)
    assert ex.rec.outcome == "ttft_timeout"
    assert ex.rec.silent_s == pytest.approx(1.0)


def test_a_content_stream_that_went_quiet_stays_stalled_its_silence_the_stall_limit():
    ex = exchange()
    ex.received(head() + event("a"), 100.5)
    ex.expire(102.5)
    assert ex.rec.outcome == "stalled"
    assert ex.rec.silent_s == pytest.approx(2.0)
    assert ex.rec.end_s == pytest.approx(2.5)


def test_a_connection_closed_after_the_silence_without_an_answer_is_stranded():
    ex = exchange()
    ex.ended(None, 103.0)
    assert ex.rec.outcome == "stranded"
    assert "connect_error" in str(ex.rec.error)
    assert ex.rec.silent_s == pytest.approx(3.0)


def test_cancelled_has_no_end():
    ex = exchange()
    ex.received(head() + event("a"), 100.5)
    ex.cancel()
    assert (ex.rec.outcome, ex.rec.end_s) == ("cancelled", None)


@pytest.mark.parametrize(
    ("headers", "replica", "failed_over", "kv"),
    [
        (b"x-llmchaos-replica: 1\r\nx-llmchaos-failover: 2\r\nx-llmchaos-kv: recomputed\r\n", "1", 2, "recomputed"),
        (b"x-llmchaos-replica:  \r\nx-llmchaos-failover: -1\r\nx-llmchaos-kv: Pulled\r\n", None, 0, None),
        (b"x-llmchaos-failover: two\r\nx-llmchaos-kv: timed_out\r\n", None, 0, "timed_out"),
        (b"", None, 0, None),
    ],
)
def test_the_cluster_s_headers_name_the_replica_its_failovers_and_the_kv_way(headers, replica, failed_over, kv):
    ex = exchange()
    ex.received(head(extra=headers) + event("a") + DONE, 100.5)
    line = ex.rec.line()
    assert (line.replica, line.failed_over, line.kv) == (replica, failed_over, kv)
    assert line.problem() is None


def test_a_real_router_s_header_names_the_replica_when_mapped():
    ex = exchange(Limits(replica_header="x-envoy-upstream-host"))
    ex.received(head(extra=b"X-Envoy-Upstream-Host: 10.0.0.5:8000\r\nx-llmchaos-replica: 3\r\n") + DONE, 100.5)
    assert ex.rec.replica == "10.0.0.5:8000"
