"""The SSE chaos proxy as an HTTP/1.1 relay, with no fault active, against upstreams that answer
byte for byte as each test scripts them (tests/servers/raw_upstream.py) and the reference server:
pipelining, HEAD, a pooled connection after a large answer, close-delimited answers, a client that
leaves before the first byte, and upstreams that misbehave."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import psutil
import pytest

from tests.integration.http_reader import Reader, request
from tests.integration.test_sse_proxy import proxy, proxy_process, running
from tests.procs import serve
from tests.servers import raw_upstream
from tests.servers.raw_upstream import RawUpstream, echo_line


@pytest.fixture(scope="module")
def upstream() -> Iterator[RawUpstream]:
    with raw_upstream.running() as u:
        yield u


@pytest.fixture(scope="module")
def proxied(upstream: RawUpstream) -> Iterator[tuple[str, psutil.Process]]:
    with proxy_process(upstream.url) as (url, proc):
        yield url, psutil.Process(proc.pid)


def connect(url: str, timeout: float = 5.0) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def script(p: str, pieces: list[str], **options: object) -> httpx.Response:
    return httpx.post(p + "/script", json={"pieces": pieces, **options}, timeout=10)


def test_pipelined_posts_each_get_their_own_answer(proxied):
    p, _ = proxied
    with connect(p) as s:
        s.sendall(request("POST", "/echo/length", b"one") + request("POST", "/echo/length", b"two"))
        reader = Reader(s)
        answers = [reader.answer("POST"), reader.answer("POST")]
    assert [a.headers["x-echo"] if a else None for a in answers] == [
        echo_line("POST", "/echo/length", b"one"),
        echo_line("POST", "/echo/length", b"two"),
    ]


def test_a_head_answer_leaves_the_connection_usable(proxied):
    p, _ = proxied
    with connect(p) as s:
        reader = Reader(s)
        s.sendall(request("HEAD", "/echo/length/100"))
        head = reader.answer("HEAD")
        s.sendall(request("GET", "/echo/chunked/100"))
        get = reader.answer("GET")
    assert head is not None
    assert (head.status, head.headers["content-length"], head.body) == (200, "100", b"")
    assert get is not None
    assert (get.status, len(get.body)) == (200, 100)


def test_a_pooled_connection_answers_after_a_large_answer(proxied):
    p, _ = proxied
    big = 4_000_000
    for _ in range(10):
        with connect(p) as s:  # read slowly: the proxy's writes to this client back up
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            s.sendall(request("GET", f"/echo/length/{big}", extra="connection: close\r\n"))
            got = 0
            while chunk := s.recv(16384):
                got += len(chunk)
                time.sleep(0.0002)
        assert got > big
        with connect(p) as s:  # the next request takes the pooled upstream connection
            s.sendall(request("GET", "/echo/length"))
            answer = Reader(s).answer("GET")
        assert answer is not None
        assert answer.status == 200


@pytest.mark.parametrize("frame", ["close", "http10"])
def test_close_delimited_answers_arrive_whole(proxied, frame):
    p, _ = proxied
    with httpx.Client(base_url=p, timeout=10) as c:
        for size in (100_000, 100):  # the client connection carries on after one
            r = c.get(f"/echo/{frame}/{size}")
            assert r.status_code == 200
            assert len(r.content) == size
            assert r.content.startswith(r.headers["x-echo"].encode())


def test_a_close_delimited_event_stream_ends_cleanly(proxied):
    p, _ = proxied
    head = "HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
    r = script(p, [head, "data: a\n\n", "data: b\n\n", "data: [DONE]\n\n"])
    assert r.status_code == 200
    assert r.text == "data: a\n\ndata: b\n\ndata: [DONE]\n\n"


def test_an_upstream_with_endless_headers_is_a_502_in_bounded_memory(proxied):
    p, ps = proxied
    before = ps.memory_info().rss
    r = script(p, ["HTTP/1.1 200 OK\r\n"], repeat="x-filler: " + "a" * 1000 + "\r\n")
    assert r.status_code == 502
    assert "head over" in r.json()["error"]
    assert ps.memory_info().rss - before < 20_000_000


def test_a_request_head_trickled_past_the_header_timeout_is_cut_off(upstream):
    """Slowloris: heads sent a byte at a time are answered 408 and closed once the header timeout
    passes from their first byte, while other clients are served and an idle keep-alive connection,
    between requests, is left alone."""
    with proxy_process(upstream.url, "--header-timeout", "1") as (p, _):
        idle = connect(p)
        idle.sendall(request("POST", "/echo/length", b"before"))
        assert Reader(idle).answer("POST") is not None
        slow = [connect(p) for _ in range(20)]
        started = time.monotonic()
        head = request("POST", "/echo/length", b"x")
        for i in range(len(head)):
            for s in slow:
                s.sendall(head[i : i + 1])
            time.sleep(0.1)
            if time.monotonic() - started > 3:
                break
        with httpx.Client(base_url=p, timeout=5) as c:
            assert c.post("/echo/length", content=b"meanwhile").status_code == 200
        for s in slow:
            answer = Reader(s).answer("POST")
            assert answer is not None
            assert answer.status == 408
            s.close()
        idle.sendall(request("POST", "/echo/length", b"after"))  # idle for over 3 s between its requests
        answer = Reader(idle).answer("POST")
        idle.close()
        assert answer is not None
        assert answer.headers["x-echo"] == echo_line("POST", "/echo/length", b"after")


def test_large_request_bodies_leave_the_proxy_as_they_came(proxied):
    """Each relayed body is let go once answered: 20 bodies of 8 MB grew the proxy by about 200 MB
    (one held per finished exchange until a full collection, which gc.freeze makes rare)."""
    p, ps = proxied
    body = b"x" * 8_000_000
    before = ps.memory_info().rss
    for _ in range(20):
        with connect(p, timeout=30) as s:
            s.sendall(request("POST", "/echo/length", body))
            answer = Reader(s).answer("POST")
        assert answer is not None
        assert answer.headers["x-echo"] == echo_line("POST", "/echo/length", body)
    assert ps.memory_info().rss - before < 40_000_000


@pytest.mark.parametrize(
    "pieces",
    [["garbage\r\n\r\n"], ["HTTP/1.1 2x0 OK\r\n\r\n"], ["HTTP/1.1 200 OK\r\ncontent-length: nine\r\n\r\n"], []],
    ids=["garbage", "bad-status", "bad-length", "closed-without-answer"],
)
def test_a_broken_upstream_answer_is_a_502(proxied, pieces):
    p, _ = proxied
    r = script(p, pieces)
    assert r.status_code == 502
    assert r.json()["error"].startswith("upstream")


@pytest.mark.timing
def test_a_client_that_leaves_before_the_first_byte_cancels_the_upstream_request():
    body = {
        "model": "llmchaos-sim-8b",
        "max_tokens": 2000,  # about 12 s at this time scale
        "ignore_eos": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with serve("--sim-time-scale", "0.5") as server, proxy(server.url) as p:
        with connect(p) as s:
            s.sendall(request("POST", "/v1/chat/completions", json.dumps(body).encode()))
            deadline = time.monotonic() + 5
            while running(server.url) != 1:
                assert time.monotonic() < deadline, "the request never started"
                time.sleep(0.05)
        deadline = time.monotonic() + 3  # the client left: the proxy cancels upstream, the server frees it
        while running(server.url) != 0:
            assert time.monotonic() < deadline, "the upstream request outlived its client"
            time.sleep(0.05)


def test_the_proxys_own_answer_to_a_head_has_no_body(proxied):
    p, _ = proxied
    with connect(p) as s:
        reader = Reader(s)
        s.sendall(request("HEAD", "/_llmchaos/fault") + request("GET", "/_llmchaos/fault"))
        head, get = reader.answer("HEAD"), reader.answer("GET")
    assert head is not None
    assert (head.status, head.body) == (200, b"")
    assert get is not None
    assert (get.status, get.body) == (200, b'{"active": false, "fault": null}')


def test_answers_before_a_refusal_survive_what_the_client_sent_after_it(proxied):
    p, _ = proxied
    with connect(p) as s:  # the proxy stops parsing at the bad request; the rest stays unread
        s.sendall(request("GET", "/echo/length") + b"GARBAGE " + b"x" * 200_000)
        time.sleep(0.3)  # the proxy has answered both and closed by now
        reader = Reader(s)
        good, refused = reader.answer("GET"), reader.answer("GET")
        assert reader.closed()
    assert good is not None
    assert good.status == 200
    assert refused is not None
    assert refused.status == 400
