"""One request on the Python data plane: its response framed as the bytes arrive (httptools), each
SSE event timed by the kernel's receive stamp of its read, and judged by `response.Response`.

Everything here runs on the plane's thread; the record is handed back, whole, by `finished`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

import httptools

from llmchaos import sse_codec
from loadtests.adapters import Adapter
from loadtests.dataplane.loop import Plane
from loadtests.dataplane.response import ERROR_TEXT, Limits, Outcome, Response, count_read
from loadtests.record import RequestRecord

DRAIN_S = 1.0  # a server ends the body right after the terminator; longer, the connection is dropped


class Link(Protocol):
    """What an exchange needs of the connection carrying it."""

    plane: Plane

    @property
    def exchange(self) -> Exchange | None: ...

    def release(self) -> None: ...

    def close(self) -> None: ...

    def read_pending(self) -> None: ...


class Exchange(Response):
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
        super().__init__(adapter, stream, rec, start, limits)
        self.request, self._finished = request, finished
        self.created = time.perf_counter()
        self.conn: Link | None = None  # set when a connection takes it up
        self.reused = False  # sent on a connection that served an earlier request
        self.began = False  # a response byte has arrived
        self.parser = httptools.HttpResponseParser(self)
        self.complete = False  # the response ended as HTTP frames it
        self.interim = False  # an interim (1xx) response is being parsed
        self._pieces: list[bytes] = []  # body bytes of the read being parsed
        self.decoder = sse_codec.Decoder()
        self.connect_by: float | None = None  # while connecting: when that is given up
        self.deadline: float | None = self.limit
        self.scheduled = math.inf  # the plane's

    # -- httptools callbacks ---------------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.header(name.decode("latin-1"), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim response (100 Continue, 103 Early Hints): the real one follows
            self.headers.clear()
            self.interim = True
            return
        self.headers_complete(status)

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            return
        self.complete = True

    # -- from the connection -----------------------------------------------------------------------
    def connecting(self, now: float) -> None:
        self.connect_by = now + self.limits.connect
        self.deadline = min(self.limit, self.connect_by)

    def connected(self) -> None:
        self.connect_by = None
        self.deadline = self.limit

    def written(self, now: float, began: float) -> None:
        """The request's last byte went to the kernel (`now`, perf_counter) in a send called at
        `began`: the server's silence counts from there (it cannot have had the request before)."""
        self.rec.send_s = now - self.created
        self.heard_at = began

    def received(self, data: bytes, now: float, late: float = 0.0) -> None:
        """The bytes of one read, whose last reached the host at `now` (perf_counter) and its first
        at most `late` seconds before (`count_read`)."""
        if self.done:
            self._drain(data)
            return
        if now >= self.limit:  # nothing, or only bytes that are no event (comments, a trickle), in time
            self.give_up()
            return
        self.heard(now)
        self.began = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.upgrade()
            return
        except httptools.HttpParserError as e:
            if self._pieces and self.mode:  # the body before the fault counts (a terminator in it: ok)
                self._dispatch(b"".join(self._pieces), now, late)
                self._pieces.clear()
            if not self.done:
                self.http_fault(str(e))
            return
        pieces = self._pieces
        if not self.mode or (not pieces and not self.complete and self.mode in ("body", "error")):
            return  # the headers are not all in yet, or a whole body is still to come
        body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        self._dispatch(body, now, late)

    def _dispatch(self, body: bytes, now: float, late: float = 0.0) -> None:
        """Body bytes of one read, by what the response turned out to be."""
        if self.mode == "stream":
            self._stream(body, now, late)
        elif self.mode == "not_sse":
            self.not_a_stream()
        elif self.mode == "body":
            self.body_part(body)
            if self.complete and not self.done:
                self.whole_body(now)
        else:
            self.head += body[: ERROR_TEXT - len(self.head)]
            if self.complete:
                self.error_status()

    def ended(self, error: OSError | None, now: float) -> None:
        """The connection closed (`error` None: cleanly, by the peer) or failed."""
        if self.done:
            return
        if error is None and self.mode and self._close_delimited():
            self.complete = True
            self._dispatch(b"", now)
            return
        self.lost(error, now)

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
                self.give_up()
            elif self.conn is not None:  # an event in time moved the limit
                self.conn.plane.due(self)
        elif self.connect_by is not None:
            self.connect_timeout(now)

    def cancel(self) -> None:
        """The request's greenlet was killed (the test is stopping): drop the connection."""
        if self.done:
            return
        self.end("cancelled", None)

    # -- the response --------------------------------------------------------------------------
    def _stream(self, data: bytes, now: float, late: float) -> None:
        # never before the read ahead of it: the kernel's stamps are ordered, but their conversion to
        # this clock can put one a fraction of a microsecond before the one ahead (a gap below zero)
        now = max(now, self.last_event)
        rec = self.rec
        chunks, before = rec.chunks, len(rec.chunks)
        self.head += data[: ERROR_TEXT - len(self.head)]  # its first bytes, to show what a non-stream was
        outcome, last_content = self._events(data, now)
        count_read(rec, len(chunks) - before, last_content and not self.decoder.trailed, late)
        if outcome is not None:
            self.end(*outcome)
        elif self.complete:
            self.cut(self.decoder.comments, self.decoder.pending())
        else:
            self.limit, self.why = self._limit()
            self.deadline = self.limit
            if self.conn is not None:
                self.conn.plane.due(self)

    def _events(self, data: bytes, now: float) -> tuple[Outcome | None, bool]:
        """Each event of one read, timed `now`; the outcome when one ends the request, and whether
        the read's last event was content."""
        events, chunks, content = self.decoder.feed(data), self.rec.chunks, False
        for i, ev in enumerate(events):
            before = len(chunks)
            outcome = self.event(ev.data, ev.valid_utf8, now)
            content = len(chunks) > before and i + 1 == len(events)
            if outcome is not None:
                return outcome, content
        overflow: Outcome | None = ("malformed", f"SSE: {self.decoder.overflow}") if self.decoder.overflow else None
        return overflow, content

    def _close_delimited(self) -> bool:
        """The body ends when the connection does (neither a length nor chunks)."""
        return "content-length" not in self.headers and "chunked" not in self.headers.get("transfer-encoding", "")

    def end(self, outcome: str, error: str | None) -> None:
        """The record is whole: hand it back; keep the connection only after a whole, good
        response (draining what follows a terminator for DRAIN_S at most)."""
        conn = self.conn
        self.settle(outcome, error)
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
