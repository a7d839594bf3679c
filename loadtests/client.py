"""Streaming HTTP client for the Locust users: times every SSE event and classifies the outcome.

Built on geventhttpclient (Locust's own fast client, a C parser, gevent sockets):
httpx under gevent costs several times more CPU per event and per client, and that
CPU time shows up as latency in every stream in flight.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

import gevent
import gevent.socket
from geventhttpclient import HTTPClient
from geventhttpclient.connectionpool import ConnectionPool
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError, HTTPSocketPoolResponse
from geventhttpclient.url import URL

from llmchaos import sse_codec
from llmchaos.net import SO_TIMESTAMPNS
from loadtests.adapters import Adapter, Call
from loadtests.record import RequestRecord

RX_CMSG = socket.CMSG_SPACE(16)


class TimestampedSocket(gevent.socket.socket):
    """Keeps the kernel's receive time (SO_TIMESTAMPNS) of the bytes of its last read, on the
    perf_counter clock, so an event is timed when it reached the host, not when a busy generator
    got to it."""

    __slots__ = ("rx_time",)

    def __init__(self, family: int, socktype: int, protocol: int) -> None:
        super().__init__(family, socktype, protocol)
        self.rx_time: float | None = None
        if sys.platform == "linux":
            self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def recv(self, n: int, flags: int = 0) -> bytes:
        data, ancillary, _, _ = self.recvmsg(n, RX_CMSG, flags)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", payload[:16])
                now = time.perf_counter()
                self.rx_time = min(now, now - (time.time() - sec - nsec * 1e-9))
        return data


class TimestampedPool(ConnectionPool):
    """geventhttpclient's pool of one connection, on a TimestampedSocket."""

    def _create_tcp_socket(self, family: int, socktype: int, protocol: int) -> gevent.socket.socket:
        return TimestampedSocket(family, socktype, protocol)


def received_at(resp: HTTPSocketPoolResponse) -> float:
    """When the bytes just read arrived, on the perf_counter clock (now, without a kernel stamp)."""
    rx = getattr(getattr(resp, "_sock", None), "rx_time", None)
    return time.perf_counter() if rx is None else rx


def header(resp: HTTPSocketPoolResponse, name: str) -> str | None:
    """A response header's value; a repeated one joined as HTTP allows."""
    value = resp.get(name)
    return ", ".join(value) if isinstance(value, list) else value


class StreamClient:
    """One connection (reused) to one target; one request at a time."""

    def __init__(
        self, base_url: str, connect_timeout: float = 5.0, stall_limit: float = 30.0, request_timeout: float = 600.0
    ) -> None:
        url = URL(base_url)
        self.prefix = url.path.rstrip("/")
        self.url = url
        self.connect_timeout, self.stall_limit, self.request_timeout = connect_timeout, stall_limit, request_timeout
        self._http: HTTPClient | None = None

    def _client(self) -> HTTPClient:
        if self._http is None:
            http = HTTPClient.from_url(
                self.url, concurrency=1, connection_timeout=self.connect_timeout, network_timeout=self.stall_limit
            )
            if self.url.scheme == "http":  # TLS hides the kernel's stamps; https keeps the read time
                host, port = self.url.host, self.url.port or 80
                http._connection_pool = TimestampedPool(
                    host,
                    port,
                    host,
                    port,
                    size=1,
                    connection_timeout=self.connect_timeout,
                    network_timeout=self.stall_limit,
                )
            self._http = http
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def run(self, adapter: Adapter, call: Call, stream: bool, rec: RequestRecord, start: float) -> None:
        """Send `call` and fill `rec`; `start` is the perf_counter time latencies count from."""
        rec.sent = time.time()
        ok = False
        try:
            resp = self._client().request("POST", self.prefix + call.path, body=call.body, headers=call.headers)
            rec.status = resp.status_code
            if resp.status_code != 200:
                self._error_status(resp, rec)
            elif stream:
                self._read_stream(adapter, resp, rec, start)
            else:
                self._read_body(adapter, resp, rec, start)
            ok = rec.outcome == "ok"
        except gevent.GreenletExit:
            rec.outcome = "cancelled"
            raise
        except (ConnectionRefusedError, OSError, HTTPConnectionClosed, HTTPParseError) as e:
            if rec.status is None:
                rec.outcome, rec.error = "connect_error", f"{type(e).__name__}: {e}"
            elif rec.outcome == "ok":
                rec.outcome, rec.error = "truncated", f"{type(e).__name__}: {e}"
        finally:
            if not ok:
                self.close()  # never reuse a connection left mid-response

    def _error_status(self, resp: HTTPSocketPoolResponse, rec: RequestRecord) -> None:
        rec.outcome = "rate_limited" if resp.status_code == 429 else f"http_{resp.status_code}"
        rec.retry_after = header(resp, "retry-after")
        rec.error = resp.read()[:500].decode("utf-8", "replace")

    def _read_body(self, adapter: Adapter, resp: HTTPSocketPoolResponse, rec: RequestRecord, start: float) -> None:
        raw = resp.read()
        now = time.perf_counter()
        try:
            ev = adapter.body(raw)
        except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError) as e:
            rec.outcome, rec.error = "malformed", f"body: {e}"
            return
        if ev.error is not None:
            rec.outcome, rec.error = f"http_{ev.error_code or 500}", ev.error
            return
        rec.chunks, rec.usage_tokens = [ev.text], ev.usage_tokens
        rec.ttft = rec.e2e = now - start

    def _read_stream(self, adapter: Adapter, resp: HTTPSocketPoolResponse, rec: RequestRecord, start: float) -> None:
        ctype = header(resp, "content-type") or ""
        if not ctype.startswith("text/event-stream"):
            rec.outcome, rec.error = "malformed", f"content-type {ctype!r}"
            return
        decoder, last, deadline, seen = sse_codec.Decoder(), 0.0, start + self.request_timeout, 0
        readline, chunks, gaps = resp.readline, rec.chunks, rec.gaps
        while True:
            try:
                line = readline(b"\n")
            except TimeoutError:  # no byte within the stall limit
                now = time.perf_counter()
                if not chunks and now < deadline:
                    continue  # still waiting for the first token: that is TTFT, not a stall
                rec.outcome = "stalled" if now < deadline else "timeout"
                rec.error = f"no data for {self.stall_limit:g}s"
                return
            now = received_at(resp)
            if not line:  # the end: was it a stream cut short, or never a stream at all?
                junk = resp.read()  # bytes that never ended in a newline
                if junk and not seen and not decoder.comments:
                    rec.outcome, rec.error = "malformed", f"not an event stream: {junk[:80]!r}"
                else:
                    rec.outcome, rec.error = "truncated", "stream ended without a terminator"
                return
            for ev in decoder.feed(line):
                seen += 1
                if not ev.valid_utf8:
                    rec.outcome, rec.error = "malformed", "invalid UTF-8 in an event"
                    return
                try:
                    parsed = adapter.event(ev.data)
                except (ValueError, KeyError, IndexError, TypeError) as e:
                    rec.outcome, rec.error = "malformed", f"event {ev.data[:80]!r}: {e}"
                    return
                if parsed.error is not None:
                    rec.outcome, rec.error = f"http_{parsed.error_code or 500}", parsed.error
                    return
                if parsed.text:
                    if chunks:
                        gaps.append(now - last)
                    else:
                        rec.ttft = now - start
                    chunks.append(parsed.text)
                    last = now
                if parsed.usage_tokens is not None:
                    rec.usage_tokens = parsed.usage_tokens
                if parsed.done:
                    rec.e2e = now - start
                    if not chunks:
                        rec.outcome, rec.error = "malformed", "stream ended with no content"
                    self._drain(resp)
                    return
            if now > deadline:
                rec.outcome, rec.error = "timeout", f"no terminator within {self.request_timeout:g}s"
                return

    @staticmethod
    def _drain(resp: HTTPSocketPoolResponse) -> None:
        """Read the rest (usage chunk after a Gemini finish, the chunked terminator) so the
        connection can be reused."""
        resp.read()
