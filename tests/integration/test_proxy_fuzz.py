"""The proxy's HTTP parsing under fuzz, against a real upstream (tests/servers/raw_upstream.py) with
no fault active: pipelined requests of any method, with and without bodies (content-length or
chunked), framed answers of every kind, the bytes cut anywhere. Every well-formed request gets its
own answer, in order; a malformed one a 400 and the connection closes; the proxy never dies or
hangs (each read waits at most TIMEOUT_S)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.integration.http_reader import Reader, request
from tests.integration.test_proxy_http import connect
from tests.integration.test_sse_proxy import proxy_process
from tests.servers import raw_upstream
from tests.servers.raw_upstream import echo_line
from tests.sse_streams import split

TIMEOUT_S = 5.0
MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1\r\nbad header\r\n\r\n",
    b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
    b"POST / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
    b"POST / HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\nabc",
    b"GET /\x00 HTTP/1.1\r\n\r\n",
    b"GET / HTTP/7.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nx: " + b"a" * 70_000 + b"\r\n\r\n",  # a head over the limit: 431
]


@dataclass
class Sent:
    method: str
    target: str
    body: bytes
    size: int
    closes: bool  # the connection ends after its answer
    wire: bytes


TOKEN = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
VALUE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12)


@st.composite
def requests(draw: st.DrawFn, last: bool) -> Sent:
    method = draw(st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"]))
    frame = draw(st.sampled_from(["length", "chunked", "close", "http10"]))
    size = draw(st.sampled_from([0, 1, 100, 5000, 300_000]))
    query = draw(st.text("abcXYZ019-._~%=&/", max_size=8))
    target = f"/echo/{frame}/{size}" + (f"?{query}" if query else "")
    body = draw(st.binary(max_size=600)) if method in ("POST", "PUT") or draw(st.booleans()) else b""
    extra = "".join(f"x-{k}: {v}\r\n" for k, v in draw(st.lists(st.tuples(TOKEN, VALUE), max_size=3)))
    closes = last and draw(st.booleans())  # by `connection: close`, or as HTTP/1.0 does
    version = draw(st.sampled_from(["1.1", "1.0"])) if closes else "1.1"
    if closes and version == "1.1":
        extra += "connection: close\r\n"
    chunked = version == "1.1" and draw(st.booleans())
    chunks = split(body, draw(st.lists(st.integers(0, 600), max_size=4))) if chunked else None
    wire = request(method, target, body, chunks=chunks, extra=extra, version=version)
    return Sent(method, target, body, size, closes, wire)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[Sent], bytes | None]:
    n = draw(st.integers(1, 4))
    sent = [draw(requests(last=i == n - 1)) for i in range(n)]
    bad = draw(st.sampled_from([None, *MALFORMED])) if not sent[-1].closes else None
    return sent, bad


def posted(body: bytes) -> Sent:
    return Sent("POST", "/echo/length/1", body, 1, False, request("POST", "/echo/length/1", body))


@pytest.fixture(scope="module")
def proxied() -> Iterator[tuple[str, subprocess.Popen]]:
    with raw_upstream.running() as upstream, proxy_process(upstream.url) as p:
        yield p


def send_in_pieces(s: socket.socket, data: bytes, cuts: list[int]) -> None:
    for piece in split(data, cuts):
        s.sendall(piece)
        time.sleep(0.0005)  # each piece its own read at the proxy, mostly


def check_alive(p: str, proc: subprocess.Popen) -> None:
    assert proc.poll() is None, "the proxy died"
    with connect(p, TIMEOUT_S) as s:
        s.sendall(request("GET", "/echo/length"))
        answer = Reader(s).answer("GET")
    assert answer is not None
    assert answer.status == 200


@pytest.mark.fuzz
@given(conversation=conversations(), cuts=st.lists(st.integers(0, 3000), max_size=6))
@example(conversation=([posted(b"one"), posted(b"two")], None), cuts=[])  # pipelined: each its own answer
@example(conversation=([posted(b"")], MALFORMED[-1]), cuts=[])  # a whole head over the limit in one read
def test_each_request_gets_its_own_answer_in_order(proxied, conversation, cuts):
    p, proc = proxied
    sent, bad = conversation
    with connect(p, TIMEOUT_S) as s:
        send_in_pieces(s, b"".join(x.wire for x in sent) + (bad or b""), cuts)
        reader = Reader(s)
        for x in sent:
            answer = reader.answer(x.method)
            assert answer is not None, f"no answer to {x.method} {x.target}"
            assert (answer.status, answer.headers.get("x-echo")) == (200, echo_line(x.method, x.target, x.body))
            assert len(answer.body) == (0 if x.method == "HEAD" else x.size)
        if bad is not None:
            answer = reader.answer("GET")
            assert answer is not None
            assert answer.status == (431 if len(bad) > 65536 else 400)
        if bad is not None or sent[-1].closes:
            assert reader.closed()
    check_alive(p, proc)


@pytest.mark.fuzz
@given(junk=st.binary(min_size=1, max_size=300), cuts=st.lists(st.integers(0, 300), max_size=4))
@example(junk=b"GET /echo/length HTTP/1.1\r\n", cuts=[])
def test_any_bytes_leave_the_proxy_answering(proxied, junk, cuts):
    p, proc = proxied
    with connect(p, TIMEOUT_S) as s:
        send_in_pieces(s, junk, cuts)
        with contextlib.suppress(OSError):  # the proxy may have closed first, or reset (it had unread bytes)
            s.shutdown(socket.SHUT_WR)  # a client that leaves
            while s.recv(65536):
                pass
    check_alive(p, proc)
