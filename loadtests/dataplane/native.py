"""The native plane (`_native.c`): one C thread per process reads every stream, frames HTTP, splits
SSE and stamps each event with its read's kernel receive time without the GIL; the request's own
greenlet wakes only when the stream has news to judge (its first events, one that may end it, its
end, its deadline) and judges it with `Response`, as the Python plane does.
"""

from __future__ import annotations

import os
import sys
import weakref
from time import perf_counter

import gevent
from gevent import monkey

from loadtests.adapters import Adapter
from loadtests.dataplane.response import Limits, Outcome, Response, count_read
from loadtests.record import RequestRecord

try:
    from loadtests.dataplane import _native
except ImportError:  # not built (no C compiler at install): the Python plane serves
    _native = None  # type: ignore[assignment]

_plane = None
_lock = monkey.get_original("_thread", "allocate_lock")()


def available() -> bool:
    return _native is not None


def _forget() -> None:
    """A forked child (Locust's --processes) has no plane thread: it starts its own."""
    global _plane, _lock
    _plane, _lock = None, monkey.get_original("_thread", "allocate_lock")()


os.register_at_fork(after_in_child=_forget)


def plane() -> _native.Plane:
    """This process's native plane, started on first use."""
    global _plane
    if _plane is None:
        with _lock:
            if _plane is None:
                _plane = _native.Plane()
    return _plane


class NativeLink:
    """One keep-alive connection on the native plane (to `address`: family, sockaddr); one request at
    a time, run by the calling greenlet."""

    def __init__(self, address: tuple[int, tuple]) -> None:
        family, sockaddr = address
        self.plane = plane()
        self.id, self.notify_fd = self.plane.connection(family, *sockaddr)
        weakref.finalize(self, self.plane.drop, self.id)

    @property
    def opened(self) -> int:
        return int(self.plane.opened(self.id))

    def close(self) -> None:
        self.plane.close(self.id)

    def run(
        self, adapter: Adapter, request: bytes, stream: bool, rec: RequestRecord, start: float, limits: Limits
    ) -> None:
        """Send `request` and fill `rec` from its response; returns when the record is whole."""
        ex = NativeExchange(self, adapter, stream, rec, start, limits)
        ex.seq = self.plane.start(self.id, request, stream, limits.connect, ex.limit, 0.0, adapter.ends)
        hub = gevent.get_hub()
        news = hub.loop.io(self.notify_fd, 1)
        try:
            while not ex.done:
                hub.wait(news)
                ex.judge_guarded(self.plane.take(self.id, ex.seq))
        except BaseException as e:  # killed (the test stops) or timed out from outside: drop it
            if not ex.done:
                ex.end("cancelled", None)
            if isinstance(e, gevent.GreenletExit):
                rec.outcome = "cancelled"
            raise
        finally:
            news.close()


class NativeExchange(Response):
    """A request on the native plane, judged from what each `take` brought."""

    def __init__(
        self, link: NativeLink, adapter: Adapter, stream: bool, rec: RequestRecord, start: float, limits: Limits
    ) -> None:
        super().__init__(adapter, stream, rec, start, limits)
        self.link, self.seq = link, 0
        self.created = perf_counter()

    def end(self, outcome: str, error: str | None) -> None:
        """The record is whole; the connection is kept only after a whole, good response (the plane
        drains what follows a terminator for a second at most)."""
        self.settle(outcome, error)
        self.done = True
        self.link.plane.finish(self.link.id, self.seq, outcome == "ok")

    def judge_guarded(self, news: _native.News) -> None:
        """`judge`; a bug in it (an adapter's, say) ends this request, reported, and the run goes on."""
        try:
            self.judge(news)
        except Exception as e:  # noqa: BLE001 - one request's bug must not end its user
            sys.excepthook(type(e), e, e.__traceback__)
            if not self.done:
                self.end("malformed", f"unreadable by the client: {type(e).__name__}: {e}")

    def judge(self, news: _native.News) -> None:
        (
            status,
            headers,
            events,
            body,
            first,
            end,
            err,
            message,
            end_at,
            comments,
            pending,
            send_at,
            expired,
            heard_at,
            quiet,
        ) = news
        rec = self.rec
        if send_at:
            rec.send_s = send_at - self.created
        if heard_at:  # the plane's count of the silences, from the send to its last read
            rec.silent_s, self.heard_at = max(rec.silent_s, quiet), heard_at
        if headers is not None:
            for name, value in headers:
                self.header(name, value)
            self.headers_complete(status)
        self.head = first
        if self.mode == "not_sse":
            self.not_a_stream()
            return
        if events and self._events(events):
            return
        if body:
            self.body_part(body)
            if self.done:
                return
        if end != _native.E_NONE:
            self._ended(end, err, message, end_at, comments, pending)
        elif expired is not None and expired >= self.limit:
            self.give_up()
        else:
            content = bool(rec.chunks)
            deadline = self.start + self.limits.request if content else self.limit
            self.link.plane.arm(self.link.id, self.seq, deadline, self.limits.stall if content else 0.0, content)

    def _events(self, events: list[tuple[str, bool, float, float, int, bool]]) -> bool:
        """The events of one or more reads, in order; True when one ended the request. A read's
        events share its stamp and come in one take."""
        rec = self.rec
        chunks = rec.chunks
        read, content, exact, late = -1, 0, False, 0.0
        outcome: Outcome | None = None
        for i, (data, valid, stamp, read_late, read_no, trailed) in enumerate(events):
            if read_no != read:
                count_read(rec, content, exact, late)
                read, content, late = read_no, 0, read_late
            now = max(stamp, self.last_event)  # never before the read ahead of it
            if now >= self.limit:  # an event, but after the limit: no sign of life by it
                outcome = self.silent()
                break
            before = len(chunks)
            outcome = self.event(data, valid, now)
            content += len(chunks) - before
            last = i + 1 == len(events) or events[i + 1][4] != read_no  # the read's last event
            exact = len(chunks) > before and last and not trailed  # content, and the read's last bytes
            if outcome is not None:
                break
            self.limit, self.why = self._limit()
        count_read(rec, content, exact, late)
        if outcome is not None:
            self.end(*outcome)
            return True
        return False

    def _ended(self, end: int, err: int, message: str, at: float, comments: int, pending: bool) -> None:
        """The response is over on the wire: whole (HTTP framed its end), or cut, or never began."""
        if end == _native.E_COMPLETE:
            if self.mode == "stream":
                self.cut(comments, pending)
            elif self.mode == "body":
                self.whole_body(at)
            else:
                self.error_status()
        elif end == _native.E_CONNECT_TIMEOUT:
            self.connect_timeout(at)
        elif end == _native.E_UPGRADE:
            self.upgrade()
        elif end == _native.E_HTTP:
            self.http_fault(message)
        elif end == _native.E_BODY:
            self.too_large()
        elif end == _native.E_SSE:
            self.end("malformed", f"SSE: {message}")
        else:
            self.lost(OSError(err, os.strerror(err)) if end == _native.E_ERROR else None, at)
