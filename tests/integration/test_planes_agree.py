"""The native plane frames HTTP and splits SSE in C, the Python one with httptools and sse_codec: for
any response (framed by length, by chunks with extensions and trailers, or by the connection's end;
an interim 100 first; an error status; not an event stream; a broken chunk line; cut anywhere into
reads) both make the same record: outcome, status, the events' texts, and the error, but for the
wording of an HTTP parse error (httptools has its own)."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtests.adapters import ADAPTERS, Ask
from loadtests.dataplane.response import Limits
from loadtests.record import RequestRecord
from loadtests.stream_client import StreamClient
from tests.integration.test_loadtest_client import RawServer

LIMITS = Limits(connect=2.0, ttft=5.0, stall=5.0, request=10.0)


@pytest.fixture(scope="module")
def raw() -> Iterator[RawServer]:
    server = RawServer()
    yield server
    server.close()


def event(text: str) -> bytes:
    return ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n").encode()


@st.composite
def responses(draw: st.DrawFn) -> tuple[list[bytes], bool]:
    """(the response's pieces, aborted at the end: never)."""
    status = draw(st.sampled_from([200, 200, 200, 429, 500]))
    sse = draw(st.booleans()) if status == 200 else False
    texts = draw(st.lists(st.text(max_size=5), max_size=5))
    body = b"".join(map(event, texts)) + (b"data: [DONE]\n\n" if draw(st.booleans()) else b"")
    if not sse:
        body = b'{"error": {"message": "busy"}}' if status != 200 else b"<html>not a stream</html>"
    framing = draw(st.sampled_from(["chunked", "length", "close"]))
    head = f"HTTP/1.1 {status} X\r\ncontent-type: {'text/event-stream' if sse else 'application/json'}\r\n"
    if status == 429:
        head += "Retry-After: 3\r\n"
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
    parts = [body[a:b] for a, b in itertools.pairwise([0, *cuts, len(body)]) if b > a]
    if framing == "chunked":
        head += "Transfer-Encoding: chunked\r\n"
        broken = sse or status != 200  # (a 200 that is no stream ends at its head, whatever follows)
        ext = draw(st.sampled_from(["", ";x=1", " ;y"] if broken else ["", ";x=1"]))  # " ;y": llhttp refuses it
        zeros = b"0" * draw(st.sampled_from([0, 0, 1, 17]))  # 1*HEXDIG: leading zeros are sizes too
        ends = [b"\r\n", b"\r\n", b"\r\n", b"\n"] if broken else [b"\r\n"]  # a bare LF: refused by both
        wire = [
            b"%s%x%s%s%s%s" % (zeros, len(p), ext.encode(), draw(st.sampled_from(ends)), p, draw(st.sampled_from(ends)))
            for p in parts
        ]
        if broken and draw(st.integers(0, 9)) == 0:
            wire.insert(draw(st.integers(0, len(wire))), b"zz\r\n")  # not a chunk size
        wire.append(b"0\r\n" + draw(st.sampled_from([b"", b"x-trailer: 1\r\n"])) + b"\r\n")
    elif framing == "length":
        head += f"content-length: {len(body)}\r\n"
        wire = parts
    else:
        head += "connection: close\r\n"
        wire = parts
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" if draw(st.integers(0, 4)) == 0 else b""
    pieces = [interim + (head + "\r\n").encode(), *wire]
    if draw(st.integers(0, 5)) == 0 and len(pieces) > 1:
        pieces.pop()  # cut short, then closed (an abort's RST races the bytes before it: not compared here)
    return pieces, False


def record(raw: RawServer, pieces: list[bytes], cut: bool, plane: str) -> RequestRecord:
    raw.responses.put((pieces, cut))
    adapter = ADAPTERS["openai-chat"]
    rec = RequestRecord("en", adapter.name, raw.url)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LLMCHAOS_PLANE", plane)  # read when the client is made
        client = StreamClient(raw.url, LIMITS)
    assert client.plane == plane
    try:
        client.run(adapter, adapter.call(Ask("m", "en", "x", 8)), True, rec, time.perf_counter())
    finally:
        client.close()
    return rec


@pytest.mark.fuzz
@given(case=responses())
def test_both_planes_make_the_same_record_of_any_response(raw, case):
    pieces, cut = case
    native, python = (record(raw, pieces, cut, plane) for plane in ("native", "python"))
    assert (native.outcome, native.status, native.chunks, native.retry_after) == (
        python.outcome,
        python.status,
        python.chunks,
        python.retry_after,
    ), (native.error, python.error)
    if not str(python.error).startswith("HTTP: "):
        assert native.error == python.error
    assert (native.ttft is None) == (python.ttft is None)
    assert len(native.gaps) == len(python.gaps)


@pytest.mark.parametrize(
    "head",
    [
        bytes(range(256)) * 10,  # no HTTP at all: told at its first bytes, not when the connection ends
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx: a\0b\r\n\r\n",
    ],
    ids=["binary", "bad status", "NUL in a header"],
)
@pytest.mark.parametrize("plane", ["native", "python"])
def test_what_is_no_http_response_is_malformed_and_says_why(raw, head, plane):
    rec = record(raw, [head], False, plane)
    assert rec.outcome == "malformed"
    assert str(rec.error).startswith("HTTP: ")
    assert len(str(rec.error)) > len("HTTP: ")  # the parser's reason, never empty


@pytest.mark.parametrize("count", ['"10"', "10.5", "-1"])
@pytest.mark.parametrize("plane", ["native", "python"])
def test_a_usage_count_that_is_not_a_whole_number_is_malformed_and_the_request_recorded(raw, count, plane):
    usage = f'data: {{"choices": [], "usage": {{"completion_tokens": {count}}}}}\n\n'.encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    rec = record(raw, [head, event("hi") + event(" there") + usage + b"data: [DONE]\n\n"], False, plane)
    assert rec.outcome == "malformed", rec
    assert "completion_tokens is not a whole number" in str(rec.error)
    assert rec.chunks == ["hi", " there"]
    assert rec.samples() == {}  # a failure adds no latency
    assert rec.line().outcome == "malformed"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ([b"data: ", *[b"x" * (1 << 20)] * 9], "SSE: an SSE line over 8 MiB"),  # a line that never ends
        ([b"data: " + b"y" * (1 << 20) + b"\n"] * 9, "SSE: an event's data over 8 MiB"),  # an event that never does
    ],
    ids=["line", "event"],
)
@pytest.mark.parametrize("plane", ["native", "python"])
def test_a_line_or_an_event_past_8_mib_is_malformed_on_both_planes(raw, body, why, plane):
    # defect 2 of issue 34: either plane grew without bound (2.5 GB in 10 s on a line without an end)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    rec = record(raw, [head, event("hi"), *body], False, plane)
    assert (rec.outcome, rec.error, rec.chunks) == ("malformed", why, ["hi"])
