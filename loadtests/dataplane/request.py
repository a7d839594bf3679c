"""One request on the data plane: its response parsed as the bytes arrive (httptools), each SSE event
timed by the kernel's receive stamp of its read, the outcome classified, the record filled.

Everything here runs on the plane's thread; the record is handed back, whole, by `finished`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httptools

from llmchaos import sse_codec
from loadtests.adapters import Adapter
from loadtests.dataplane.loop import Plane
from loadtests.record import RequestRecord

DRAIN_S = 1.0  # a server ends the body right after the terminator; longer, the connection is dropped
ERROR_TEXT = 500  # bytes of an error body kept as the record's error
LATE_S = 0.001  # the kernel held a read's last bytes this long or more: the generator was late to it (an
# idle one reads within 0.1 ms here); several events in a read taken on time came so from the network


@dataclass(frozen=True)
class Limits:
    """When a request is given up, in seconds from its start (latencies count from the same start):
    `ttft` for the first content event (the response headers included), `request` for the
    terminator; `stall` between two events once content flows; `connect` to open a connection."""

    connect: float = 5.0
    ttft: float = 300.0
    stall: float = 30.0
    request: float = 600.0

    def silence(self, why: str) -> str:
        """The error of a request given up for `why`."""
        if why == "ttft_timeout":
            return f"no content within {self.ttft:g}s"
        if why == "stalled":
            return f"no event for {self.stall:g}s"
        return f"not done within {self.request:g}s"


def count_read(rec: RequestRecord, events: int, held: float) -> None:
    """Count a read that brought `events` content events, its last bytes `held` seconds in the kernel
    before it; several share one kernel receive stamp (a coalesced read: the gaps between them are
    lost, one before them inflated). Coalesced and late (held LATE_S or more) is the generator's
    doing; coalesced and on time, the network's (a burst, a proxy's hold: the stream as it came)."""
    if events:
        rec.reads += 1
        if events > 1:
            rec.coalesced_reads += 1
            if held >= LATE_S:
                rec.late_reads += 1


class Link(Protocol):
    """What an exchange needs of the connection carrying it."""

    plane: Plane

    @property
    def exchange(self) -> Exchange | None: ...

    def release(self) -> None: ...

    def close(self) -> None: ...

    def read_pending(self) -> None: ...


class Exchange:
    """A request's bytes, and the record its response fills. `finished` is called once, on the
    plane's thread, when the record is whole (the connection may drain a little longer)."""

    def __init__(
        self,
        adapter: Adapter,
        request: bytes,
        stream: bool,
        rec: RequestRecord,
        start: float,
        limits: Limits,
        finished: Callable[[], None],
    ) -> None:
        self.adapter, self.request, self.stream, self.rec = adapter, request, stream, rec
        self.start, self.limits, self._finished = start, limits, finished
        self.created = time.perf_counter()
        self.conn: Link | None = None  # set when a connection takes it up
        self.reused = False  # sent on a connection that served an earlier request
        self.began = False  # a response byte has arrived
        self.done = False  # the record is whole and handed back
        self.parser = httptools.HttpResponseParser(self)
        self.headers: dict[str, str] = {}
        self.mode = ""  # once the headers are in: "stream", "not_sse", "body" (a whole non-stream body) or "error"
        self.complete = False  # the response ended as HTTP frames it
        self._pieces: list[bytes] = []  # body bytes of the read being parsed
        self._whole: list[bytes] = []  # a non-stream body's, until it ends
        self.decoder = sse_codec.Decoder()
        self.last_event = self.last_content = start
        self.seen = 0  # events decoded
        self.head = b""  # a stream's first bytes (to show what a non-stream was), an error body's text
        self.connect_by: float | None = None  # while connecting: when that is given up
        self.limit, self.why = self._limit() if stream else (start + limits.request, "timeout")
        self.deadline: float | None = self.limit
        self.scheduled = math.inf  # the plane's

    # -- httptools callbacks ---------------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        status = self.rec.status = self.parser.get_status_code()
        if status != 200:
            self.mode = "error"
        elif not self.stream:
            self.mode = "body"
        else:
            sse = self.headers.get("content-type", "").startswith("text/event-stream")
            self.mode = "stream" if sse else "not_sse"

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        self.complete = True

    # -- from the connection -----------------------------------------------------------------------
    def connecting(self, now: float) -> None:
        self.connect_by = now + self.limits.connect
        self.deadline = min(self.limit, self.connect_by)

    def connected(self) -> None:
        self.connect_by = None
        self.deadline = self.limit

    def written(self, now: float) -> None:
        """The request's last byte went to the kernel (`now`, perf_counter)."""
        self.rec.send_s = now - self.created

    def received(self, data: bytes, now: float, held: float = 0.0) -> None:
        """The bytes of one read, which reached the host at `now` (perf_counter) and waited `held`
        seconds in the kernel for the read."""
        if self.done:
            self._drain(data)
            return
        if now >= self.limit:  # nothing, or only bytes that are no event (comments, a trickle), in time
            self._give_up()
            return
        self.began = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.end("malformed", "HTTP: an upgrade where a response was due")
            return
        except httptools.HttpParserError as e:
            self.end("malformed" if self.rec.status is None else "truncated", f"HTTP: {e}")
            return
        pieces = self._pieces
        if not self.mode or (not pieces and not self.complete and self.mode in ("body", "error")):
            return  # the headers are not all in yet, or a whole body is still to come
        body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        self._dispatch(body, now, held)

    def _dispatch(self, body: bytes, now: float, held: float = 0.0) -> None:
        """Body bytes of one read, by what the response turned out to be."""
        if self.mode == "stream":
            self._stream(body, now, held)
        elif self.mode == "not_sse":
            self.end("malformed", f"content-type {self.headers.get('content-type', '')!r}")
        elif self.mode == "body":
            self._whole.append(body)
            if self.complete:
                self._body(b"".join(self._whole), now)
        else:
            self.head += body[: ERROR_TEXT - len(self.head)]
            if self.complete:
                self._error_status()

    def ended(self, error: OSError | None, now: float) -> None:
        """The connection closed (`error` None: cleanly, by the peer) or failed."""
        if self.done:
            return
        if error is None and self.mode and self._close_delimited():
            self.complete = True
            self._dispatch(b"", now)
            return
        if self.rec.status is None:
            why = f"{type(error).__name__}: {error}" if error else "connection closed before the response"
            self.end("connect_error", why)
        elif self.mode == "error":
            self._error_status()
        else:
            self.end("truncated", f"{type(error).__name__}: {error}" if error else "connection closed in the body")

    def expire(self, now: float) -> None:
        """The deadline passed (the plane's timer)."""
        if self.done:
            if self.conn is not None and self.conn.exchange is self:
                self.conn.close()  # a body held open (or fed comments) past DRAIN_S costs the connection
        elif now >= self.limit:
            if self.conn is not None:  # first what reached the host in time, had the plane woken late
                self.conn.read_pending()
            if self.done:
                return
            if now >= self.limit:  # still: no sign of life by the limit
                self._give_up()
            elif self.conn is not None:  # an event in time moved the limit
                self.conn.plane.due(self)
        elif self.connect_by is not None:
            self.end("connect_error", "TimeoutError: timed out")

    def cancel(self) -> None:
        """The request's greenlet was killed (the test is stopping): drop the connection."""
        if self.done:
            return
        self.end("cancelled", None)

    # -- the response --------------------------------------------------------------------------
    def _limit(self) -> tuple[float, str]:
        """The time this stream must show its next sign of life by, and the outcome if it does not:
        the first content by the TTFT limit (a wait for it is TTFT, never a stall), then each event
        within the stall limit of the one before, and the terminator by the request limit."""
        lim, start = self.limits, self.start
        limit, why = (self.last_event + lim.stall, "stalled") if self.rec.chunks else (start + lim.ttft, "ttft_timeout")
        return (limit, why) if limit < start + lim.request else (start + lim.request, "timeout")

    def _stream(self, data: bytes, now: float, held: float) -> None:
        # never before the read ahead of it: the kernel's stamps are ordered, but their conversion to
        # this clock can put one a fraction of a microsecond before the one ahead (a gap below zero)
        now = max(now, self.last_event)
        rec = self.rec
        chunks, before = rec.chunks, len(rec.chunks)
        self.head = self.head or data
        outcome = self._events(data, now)
        count_read(rec, len(chunks) - before, held)
        if outcome is not None:
            self.end(*outcome)
        elif self.complete:  # the end: was it a stream cut short, or never a stream at all?
            if not self.seen and not self.decoder.comments and self.decoder.pending():
                self.end("malformed", f"not an event stream: {self.head[:80]!r}")
            else:
                self.end("truncated", "stream ended without a terminator")
        else:
            self.limit, self.why = self._limit()
            self.deadline = self.limit
            if self.conn is not None:
                self.conn.plane.due(self)

    def _events(self, data: bytes, now: float) -> tuple[str, str | None] | None:
        """Each event of one read, timed `now`; the outcome when one ends the request."""
        rec, adapter = self.rec, self.adapter
        chunks, gaps = rec.chunks, rec.gaps
        for ev in self.decoder.feed(data):
            self.seen += 1
            self.last_event = now
            if not ev.data:  # `data:` alone carries nothing to read
                continue
            if not ev.valid_utf8:
                return "malformed", "invalid UTF-8 in an event"
            try:
                parsed = adapter.event(ev.data)
            except (ValueError, KeyError, IndexError, TypeError) as e:
                return "malformed", f"event {ev.data[:80]!r}: {e}"
            if parsed.error is not None:
                return f"http_{parsed.error_code or 500}", parsed.error
            if parsed.text or parsed.reasoning:  # tokens of either kind: thinking counts in TTFT and ITL
                if chunks:
                    gaps.append(now - self.last_content)
                else:
                    rec.ttft = now - self.start
                if parsed.text and rec.ttfa is None:
                    rec.ttfa = now - self.start
                if parsed.reasoning:
                    rec.thinking[len(chunks)] = len(parsed.reasoning)
                chunks.append(parsed.reasoning + parsed.text)
                self.last_content = now
            if parsed.usage_tokens is not None:
                rec.usage_tokens = parsed.usage_tokens
                rec.usage_reasoning = parsed.usage_reasoning
            if parsed.done:  # the stream ended: ok, with or without text (an EOS first token)
                rec.e2e = now - self.start
                return "ok", None
        return None

    def _body(self, raw: bytes, now: float) -> None:
        rec = self.rec
        try:
            ev = self.adapter.body(raw)
        except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError) as e:
            self.end("malformed", f"body: {e}")
            return
        if ev.error is not None:
            self.end(f"http_{ev.error_code or 500}", ev.error)
            return
        rec.chunks, rec.usage_tokens, rec.usage_reasoning = (
            [ev.reasoning + ev.text],
            ev.usage_tokens,
            ev.usage_reasoning,
        )
        rec.ttft = rec.e2e = now - self.start
        rec.ttfa = rec.ttft if ev.text else None
        rec.thinking = {0: len(ev.reasoning)} if ev.reasoning else {}
        self.end("ok", None)

    def _error_status(self) -> None:
        status = self.rec.status
        self.rec.retry_after = self.headers.get("retry-after")
        outcome = "rate_limited" if status == 429 else f"http_{status}"
        self.end(outcome, self.head[:ERROR_TEXT].decode("utf-8", "replace"))

    def _close_delimited(self) -> bool:
        """The body ends when the connection does (neither a length nor chunks)."""
        return "content-length" not in self.headers and "chunked" not in self.headers.get("transfer-encoding", "")

    def _give_up(self) -> None:
        self.end(self.why, self.limits.silence(self.why))

    def end(self, outcome: str, error: str | None) -> None:
        """The record is whole: hand it back; keep the connection only after a whole, good
        response (draining what follows a terminator for DRAIN_S at most)."""
        rec, conn = self.rec, self.conn
        rec.outcome, rec.error = outcome, error
        self.done = True
        if conn is not None:
            if outcome == "ok" and not self.complete:
                self.deadline = time.perf_counter() + DRAIN_S
                conn.plane.due(self)
            else:
                conn.plane.forget(self)
                if outcome == "ok":
                    conn.release()
                else:
                    conn.close()
        self._finished()

    def _drain(self, data: bytes) -> None:
        assert self.conn is not None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.conn.close()
            return
        self._pieces = []
        if self.complete:
            self.conn.plane.forget(self)
            self.conn.release()
