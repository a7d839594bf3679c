"""The data plane's own paths over real sockets: https through memory BIOs (stamped, verified), a
kept connection the server closed, a request killed mid-stream, a refused connection and an unknown
host, and its deadline heap."""

from __future__ import annotations

import json
import math
import queue
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import gevent
import pytest
import trustme

from loadtests.adapters import ADAPTERS, Ask, Call, Event, OpenAIChat
from loadtests.dataplane.loop import plane
from loadtests.dataplane.response import Limits
from loadtests.record import RequestRecord
from loadtests.stream_client import StreamClient, tls_context
from tests.servers import raw_upstream, scripted
from tests.servers.accepting import Accepting

pytestmark = pytest.mark.usefixtures("each_plane")
LIMITS = Limits(connect=2.0, ttft=5.0, stall=5.0, request=10.0)
GAP_S = 0.03
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def event(text: str) -> bytes:
    return ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n").encode()


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def ask(client: StreamClient, call: Call | None = None) -> RequestRecord:
    adapter = ADAPTERS["openai-chat"]
    rec = RequestRecord("en", adapter.name, "t")
    client.run(adapter, call or adapter.call(Ask("m", "en", "x", 8)), True, rec, time.perf_counter())
    return rec


class TlsServer(Accepting):
    """Answers each TLS connection with three events `GAP_S` apart and [DONE], then closes."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        self.errors: queue.Queue[str] = queue.Queue()
        super().__init__()

    def answer(self, conn: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(conn, server_side=True)
        except ssl.SSLError as e:  # the client refused our certificate
            self.errors.put(str(e))
            return
        with tls:
            head = b""
            while b"\r\n\r\n" not in head:
                head += tls.recv(65536)
            tls.sendall(HEAD + chunked(event("a")))
            for piece in (event("b"), event("c"), b"data: [DONE]\n\n"):
                time.sleep(GAP_S)
                tls.sendall(chunked(piece))
            tls.sendall(b"0\r\n\r\n")


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[TlsServer, Path]]:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server = TlsServer(server_context)
    tls_context.cache_clear()
    yield server, ca_file
    tls_context.cache_clear()
    server.close()


@pytest.mark.timing
def test_an_https_stream_is_read_and_timed_through_the_kernel_stamps(tls_server, monkeypatch):
    server, ca_file = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # how a user trusts a private CA
    client = StreamClient(f"https://localhost:{server.port}", LIMITS)
    try:
        rec = ask(client)
    finally:
        client.close()
    assert client.plane == "python"  # TLS through memory BIOs, whichever plane serves http
    assert (rec.outcome, rec.error, rec.chunks) == ("ok", None, ["a", "b", "c"])
    assert all(GAP_S * 0.9 < g < GAP_S * 10 for g in rec.gaps), rec.gaps
    assert (rec.reads, rec.coalesced_reads) == (3, 0)


def test_an_https_server_nobody_vouches_for_is_a_connect_error(tls_server):
    server, _ = tls_server
    client = StreamClient(f"https://localhost:{server.port}", LIMITS)
    try:
        rec = ask(client)
    finally:
        client.close()
    assert rec.outcome == "connect_error"
    assert str(rec.error).startswith("SSLCertVerificationError"), rec.error
    assert server.errors.get(timeout=5)


@pytest.fixture(scope="module")
def upstream() -> Iterator[raw_upstream.RawUpstream]:
    with raw_upstream.running() as server:
        yield server


def script(pieces: list[bytes], close: bool) -> Call:
    body = {"pieces": [p.decode("latin-1") for p in pieces], "gap_s": 0.0, "close": close}
    return Call("/script", {}, json.dumps(body).encode())


def test_a_kept_connection_closed_under_a_request_is_retried_once_on_a_new_one(upstream):
    # The first answer keeps the connection; at the next request the server closes it unanswered,
    # and again on the new one: sent twice in all, then a connect error, never a loop.
    client = StreamClient(upstream.url, LIMITS)
    whole = HEAD + chunked(event("a") + b"data: [DONE]\n\n") + b"0\r\n\r\n"
    try:
        assert ask(client, script([whole], close=False)).outcome == "ok"
        before = len(upstream.seen)
        rec = ask(client, script([], close=True))
    finally:
        client.close()
    assert (rec.outcome, rec.error) == ("connect_error", "connection closed before the response")
    assert len(upstream.seen) - before == 2
    assert client.connections == 2


def test_a_connection_the_server_closed_while_idle_is_replaced(upstream):
    client = StreamClient(upstream.url, LIMITS)
    whole = HEAD + chunked(event("a") + b"data: [DONE]\n\n") + b"0\r\n\r\n"
    try:
        assert ask(client, script([whole], close=True)).outcome == "ok"
        time.sleep(0.1)  # the close reaches the idle connection
        assert ask(client, script([whole], close=False)).outcome == "ok"
    finally:
        client.close()
    assert client.connections == 2


@pytest.fixture(scope="module")
def slow() -> Iterator[str]:
    with scripted.running(4) as url:
        yield url


@pytest.mark.timing
def test_a_request_killed_mid_stream_is_cancelled_and_its_connection_dropped(slow):
    client = StreamClient(slow, LIMITS)
    adapter = ADAPTERS["openai-chat"]
    body = json.loads(adapter.call(Ask("m", "en", "x", 100)).body)
    body["x_script"] = {"ttft_ms": [5, 5], "itl_ms": [20, 20]}
    call = Call("/v1/chat/completions", {"content-type": "application/json"}, json.dumps(body).encode())
    rec = RequestRecord("en", adapter.name, slow)
    try:
        g = gevent.spawn(client.run, adapter, call, True, rec, time.perf_counter())
        gevent.sleep(0.3)
        g.kill()
        assert rec.outcome == "cancelled"
        assert 0 < len(rec.chunks) < 100
        assert len(rec.gaps) == len(rec.chunks) - 1
        seen = len(rec.chunks)
        gevent.sleep(0.1)
        assert len(rec.chunks) == seen  # the plane no longer writes to it
        assert ask(client).outcome == "ok"  # the next request goes on a new connection
    finally:
        client.close()
    assert client.connections == 2


@pytest.mark.timing
@pytest.mark.parametrize("each_plane", ["python"], indirect=True)  # holds up the Python plane's thread
def test_a_plane_woken_late_reads_what_came_in_time_before_judging_a_stall(slow):
    """Events every 0.3 s against a 0.4 s stall limit; right after one is read, the plane's thread is
    held up for 0.45 s (as on a busy machine). The next event reaches the host in time, stamped so by
    the kernel, but the plane only looks again after the limit: it must read it before it judges."""
    client = StreamClient(slow, Limits(connect=2.0, ttft=5.0, stall=0.4, request=10.0))
    adapter = ADAPTERS["openai-chat"]
    body = json.loads(adapter.call(Ask("m", "en", "x", 5)).body)
    body["x_script"] = {"ttft_ms": [5, 5], "itl_ms": [300, 300]}
    call = Call("/v1/chat/completions", {"content-type": "application/json"}, json.dumps(body).encode())
    rec = RequestRecord("en", adapter.name, slow)
    try:
        g = gevent.spawn(client.run, adapter, call, True, rec, time.perf_counter())
        while len(rec.chunks) < 2:
            gevent.sleep(0.001)
        plane().call(lambda: time.sleep(0.45))
        g.join()
    finally:
        client.close()
    assert (rec.outcome, rec.error) == ("ok", None)
    assert len(rec.chunks) == 5
    assert max(rec.gaps) < 0.4


def test_a_refused_connection_is_a_connect_error():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    client = StreamClient(f"http://127.0.0.1:{port}", LIMITS)
    rec = ask(client)
    client.close()
    assert rec.outcome == "connect_error"
    assert str(rec.error).startswith("ConnectionRefusedError"), rec.error


def test_an_unknown_host_is_a_connect_error():
    rec = ask(StreamClient("http://no-such-host.invalid:80", LIMITS))
    assert rec.outcome == "connect_error"
    assert str(rec.error).startswith("gaierror"), rec.error


class Item:
    """A deadline the test moves, and when the plane expired it."""

    def __init__(self, name: str, deadline: float | None, out: queue.Queue[tuple[str, float, float | None]]) -> None:
        self.name, self.deadline, self.out = name, deadline, out
        self.scheduled = math.inf

    def expire(self, now: float) -> None:
        self.out.put((self.name, now, self.deadline))
        self.deadline = None


@pytest.mark.timing
def test_the_plane_expires_each_deadline_once_and_never_early():
    out: queue.Queue[tuple[str, float, float | None]] = queue.Queue()
    t = time.perf_counter()
    later = Item("later", t + 0.05, out)  # moved later after it was due: found at its first time, put back
    earlier = Item("earlier", t + 0.5, out)  # moved earlier: a new entry
    dropped = Item("dropped", t + 0.05, out)  # nothing due any more
    p = plane()

    def arrange() -> None:
        for item in (later, earlier, dropped):
            p.due(item)
        later.deadline, earlier.deadline = t + 0.2, t + 0.1
        p.forget(dropped)
        p.due(earlier)
        p.due(later)

    p.call(arrange)
    got = [out.get(timeout=5) for _ in range(2)]
    assert [name for name, _, _ in got] == ["earlier", "later"]
    for _, now, deadline in got:
        assert deadline is not None
        assert now >= deadline
    with pytest.raises(queue.Empty):
        out.get(timeout=0.6)  # neither expires twice, the dropped one never


def test_finished_requests_leave_the_deadline_heap_bounded():
    # Each request's limit lies minutes ahead: its entry must not keep it (and its record) that long.
    out: queue.Queue[tuple[str, float, float | None]] = queue.Queue()
    p = plane()
    counted: queue.Queue[int] = queue.Queue()
    items = [Item(str(i), time.perf_counter() + 600, out) for i in range(5000)]

    def churn() -> None:
        for item in items:
            p.due(item)
            p.forget(item)
        counted.put(p.entries)

    p.call(churn)
    assert counted.get(timeout=10) <= 64 + 1


class BrokenAdapter(OpenAIChat):
    """An adapter with a bug: any event raises what no request handling expects."""

    def event(self, data: str) -> Event:
        raise RuntimeError("a bug")


def test_a_bug_in_one_request_ends_it_and_the_plane_goes_on(upstream):
    whole = HEAD + chunked(event("a") + b"data: [DONE]\n\n") + b"0\r\n\r\n"
    client = StreamClient(upstream.url, LIMITS)
    rec = RequestRecord("en", "openai-chat", "t")
    try:
        client.run(BrokenAdapter(), script([whole], close=False), True, rec, time.perf_counter())
        assert (rec.outcome, rec.error) == ("malformed", "unreadable by the client: RuntimeError: a bug")
        assert ask(client, script([whole], close=False)).outcome == "ok"
    finally:
        client.close()


@pytest.mark.parametrize("framing", ["length", "close"])
def test_a_whole_body_in_many_reads_is_one_answer(upstream, framing):
    # --no-stream: the JSON body comes in pieces, framed by its length or by the connection's end.
    body = json.dumps({"choices": [{"message": {"content": "x" * 5000}}], "usage": {"completion_tokens": 7}})
    head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    head += f"content-length: {len(body)}\r\n\r\n" if framing == "length" else "connection: close\r\n\r\n"
    pieces = [head.encode(), *(body[i : i + 1000].encode() for i in range(0, len(body), 1000))]
    adapter = ADAPTERS["openai-chat"]
    rec = RequestRecord("en", adapter.name, "t")
    client = StreamClient(upstream.url, LIMITS)
    call = Call("/script", {}, json.dumps({"pieces": [p.decode() for p in pieces], "gap_s": 0.01}).encode())
    try:
        client.run(adapter, call, False, rec, time.perf_counter())
    finally:
        client.close()
    assert (rec.outcome, rec.error, rec.chunks, rec.usage_tokens) == ("ok", None, ["x" * 5000], 7)
    assert rec.ttft == rec.e2e
    assert rec.e2e is not None
    assert rec.e2e >= 0.01 * (len(pieces) - 1)  # timed at its last piece


class SlowReader(Accepting):
    """Reads nothing of a request for `HOLD_S`, then all of it (noting when it began and ended), then
    answers one event and [DONE]."""

    HOLD_S = 0.3

    def __init__(self) -> None:
        self.read: list[tuple[float, float]] = []  # unix: the first read, the request's last byte read
        super().__init__()

    def answer(self, conn: socket.socket) -> None:
        time.sleep(self.HOLD_S)
        began, data = time.time(), b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(1 << 16)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
        while len(body) < length:
            body += conn.recv(1 << 20)
        self.read.append((began, time.time()))
        conn.sendall(HEAD + chunked(event("ok") + b"data: [DONE]\n\n") + b"0\r\n\r\n")


def test_a_send_lasts_until_its_last_byte_went_out():
    """A 32 MiB body (more than loopback's socket buffers hold) to a server that reads nothing for
    0.3 s: the send's last byte goes out after the server began to read and before it read it all."""
    server, client = SlowReader(), None
    try:
        client = StreamClient(server.url, LIMITS)
        body = json.dumps({"messages": [{"role": "user", "content": "x" * (32 << 20)}]}).encode()
        rec = ask(client, Call("/v1/chat/completions", {"content-type": "application/json"}, body))
        assert rec.outcome == "ok", rec.error
        ((began, ended),) = server.read
        assert rec.send_s is not None
        assert began - rec.sent <= rec.send_s <= ended - rec.sent, (began - rec.sent, rec.send_s, ended - rec.sent)
    finally:
        if client is not None:
            client.close()
        server.close()
