"""Streaming HTTP client for the Locust users: times every SSE event and classifies the outcome.

Built on geventhttpclient (Locust's own fast client, a C parser, gevent sockets):
httpx under gevent costs several times more CPU per event and per client, and that
CPU time shows up as latency in every stream in flight.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
import time
from dataclasses import dataclass

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
DRAIN_S = 1.0  # a server ends the body right after the terminator; longer, the connection is dropped


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


def read_some(resp: HTTPSocketPoolResponse, timeout: float) -> tuple[bytes, float]:
    """The body bytes parsed so far, else those of one read from the socket, waiting `timeout` s at
    most (TimeoutError), and when they reached the host on the perf_counter clock; b"" once the body
    has ended. (geventhttpclient itself reads only up to a separator or a length.)"""
    sock = resp._sock
    if not resp._body_buffer and not resp.message_complete:
        if sock is None:
            raise HTTPConnectionClosed("connection closed.")
        if timeout <= 0:
            raise TimeoutError("timed out")
        before = sock.gettimeout()
        try:
            sock.settimeout(timeout)
            data = sock.recv(resp.block_size)
            resp.feed(data)
            if not data and not resp.message_complete:
                raise HTTPConnectionClosed("connection closed in the body")
        except BaseException:
            resp.release()
            raise
        finally:
            sock.settimeout(before)
    data = bytes(resp._body_buffer)
    del resp._body_buffer[:]
    rx = getattr(sock, "rx_time", None)
    return data, time.perf_counter() if rx is None else rx


def count_read(rec: RequestRecord, events: int) -> None:
    """Count a read that brought `events` content events; several share one kernel receive stamp
    (a coalesced read: the gaps between them are lost, one before them inflated)."""
    if events:
        rec.reads += 1
        if events > 1:
            rec.coalesced_reads += 1


def header(resp: HTTPSocketPoolResponse, name: str) -> str | None:
    """A response header's value; a repeated one joined as HTTP allows."""
    value = resp.get(name)
    return ", ".join(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Limits:
    """When a request is given up, in seconds from its start (latencies count from the same start):
    `ttft` for the first content event (the response headers included), `request` for the
    terminator; `stall` between two events once content flows; `connect` to open a connection."""

    connect: float = 5.0
    ttft: float = 300.0
    stall: float = 30.0
    request: float = 600.0


class StreamClient:
    """One connection (reused) to one target; one request at a time."""

    def __init__(self, base_url: str, limits: Limits) -> None:
        url = URL(base_url)
        self.prefix = url.path.rstrip("/")
        self.url = url
        self.limits = limits
        self._http: HTTPClient | None = None

    def _client(self) -> HTTPClient:
        if self._http is None:
            lim = self.limits
            http = HTTPClient.from_url(
                self.url, concurrency=1, connection_timeout=lim.connect, network_timeout=lim.request
            )
            if self.url.scheme == "http":  # TLS hides the kernel's stamps; https keeps the read time
                host, port = self.url.host, self.url.port or 80
                http._connection_pool = TimestampedPool(
                    host, port, host, port, size=1, connection_timeout=lim.connect, network_timeout=lim.request
                )
            self._http = http
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def run(self, adapter: Adapter, call: Call, stream: bool, rec: RequestRecord, start: float) -> None:
        """Send `call` and fill `rec`; `start` is the perf_counter time latencies and limits count from.
        The connection is kept only after a whole, successful response."""
        rec.sent = time.time()
        resp = None
        first, why = self._limit(rec, start, start) if stream else (start + self.limits.request, "timeout")
        timer = gevent.Timeout(max(first - time.perf_counter(), 0.0))
        try:
            with timer:  # the headers (and a whole non-stream body or error) by the first limit
                resp = self._client().request("POST", self.prefix + call.path, body=call.body, headers=call.headers)
                rec.status = resp.status_code
                if resp.status_code != 200:
                    self._error_status(resp, rec)
                elif not stream:
                    self._read_body(adapter, resp, rec, start)
            if stream and rec.status == 200:
                self._read_stream(adapter, resp, rec, start)
        except gevent.Timeout as t:
            if t is not timer:
                raise
            rec.outcome, rec.error = why, self._silence(why)
        except gevent.GreenletExit:
            rec.outcome = "cancelled"
            raise
        except (OSError, HTTPParseError) as e:  # HTTPConnectionClosed is an HTTPParseError
            if rec.status is None:
                rec.outcome, rec.error = "connect_error", f"{type(e).__name__}: {e}"
            elif rec.outcome == "ok":
                rec.outcome, rec.error = "truncated", f"{type(e).__name__}: {e}"
        finally:
            if rec.outcome != "ok" or resp is None or not resp.message_complete:
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

    def _limit(self, rec: RequestRecord, start: float, last_event: float) -> tuple[float, str]:
        """The time this stream must show its next sign of life by, and the outcome if it does not:
        the first content by the TTFT limit (a wait for it is TTFT, never a stall), then each event
        within the stall limit of the one before, and the terminator by the request limit."""
        lim = self.limits
        limit, why = (last_event + lim.stall, "stalled") if rec.chunks else (start + lim.ttft, "ttft_timeout")
        return (limit, why) if limit < start + lim.request else (start + lim.request, "timeout")

    def _read_stream(self, adapter: Adapter, resp: HTTPSocketPoolResponse, rec: RequestRecord, start: float) -> None:
        ctype = header(resp, "content-type") or ""
        if not ctype.startswith("text/event-stream"):
            rec.outcome, rec.error = "malformed", f"content-type {ctype!r}"
            return
        decoder, chunks, gaps = sse_codec.Decoder(), rec.chunks, rec.gaps
        last_event = last_content = start
        seen, head = 0, b""
        while True:
            limit, why = self._limit(rec, start, last_event)
            try:
                data, now = read_some(resp, limit - time.perf_counter())
            except TimeoutError:
                data, now = b"", limit
            if now >= limit:  # nothing, or only bytes that are no event (comments, a trickle), in time
                rec.outcome, rec.error = why, self._silence(why)
                return
            if not data:  # the end: was it a stream cut short, or never a stream at all?
                if not seen and not decoder.comments and decoder.pending():
                    rec.outcome, rec.error = "malformed", f"not an event stream: {head[:80]!r}"
                else:
                    rec.outcome, rec.error = "truncated", "stream ended without a terminator"
                return
            head = head or data
            before = len(chunks)
            try:
                for ev in decoder.feed(data):
                    seen, last_event = seen + 1, now
                    if not ev.data:  # `data:` alone carries nothing to read
                        continue
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
                            gaps.append(now - last_content)
                        else:
                            rec.ttft = now - start
                        chunks.append(parsed.text)
                        last_content = now
                    if parsed.usage_tokens is not None:
                        rec.usage_tokens = parsed.usage_tokens
                    if parsed.done:  # the stream ended: ok, with or without text (an EOS first token)
                        rec.e2e = now - start
                        self._drain(resp)
                        return
            finally:
                count_read(rec, len(chunks) - before)

    def _silence(self, why: str) -> str:
        lim = self.limits
        if why == "ttft_timeout":
            return f"no content within {lim.ttft:g}s"
        if why == "stalled":
            return f"no event for {lim.stall:g}s"
        return f"not done within {lim.request:g}s"

    @staticmethod
    def _drain(resp: HTTPSocketPoolResponse) -> None:
        """Read the rest (usage chunk after a Gemini finish, the chunked terminator) so the
        connection can be reused; a body held open (or fed comments) past DRAIN_S after the
        terminator costs the connection, not the request."""
        until = time.perf_counter() + DRAIN_S
        with contextlib.suppress(OSError, HTTPParseError):
            while read_some(resp, until - time.perf_counter())[0]:
                pass
