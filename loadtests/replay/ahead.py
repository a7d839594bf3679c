"""Requests built ahead of their time: a greenlet of its own builds the replay's calls (a prompt of
tens of thousands of tokens takes tens of milliseconds) while the dispatcher waits for the next one
due, so what is sent on time does not depend on how long its prompt took to build.

A bounded number are kept ready (by count, body bytes and how far ahead), and the builder stands
still while the dispatcher is within `slack` of sending: a build goes in parts, with a yield between
them, and no part may run when a request falls due.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

import gevent
from gevent.event import Event

MIN_SLACK, MAX_SLACK = 0.003, 0.05  # the builder stops twice its longest recent part before a send, within these
RECENT = 32  # parts: one held off the CPU by another process must not keep the builder still for good
COUNT, SIZE, HORIZON = 1024, 64 << 20, 30.0  # ready at most: requests, body bytes, seconds ahead


class Built(Protocol):
    intended: float | None
    prepare_s: float | None

    @property
    def size(self) -> int: ...


T = TypeVar("T", bound=Built)


class Ahead(Generic[T]):
    """The calls of `make(pause)` built ahead, in order; `make` calls `pause` between the parts of a
    long build (each part's time is measured there, and the build's own time kept on its request)."""

    def __init__(self, make: Callable[[Callable[[], None]], Iterator[T]]) -> None:
        self._ready: deque[T] = deque()
        self._bytes = 0
        self._room, self._have, self._quiet = Event(), Event(), Event()
        self._quiet.set()
        self._exhausted = False
        self._parts: deque[float] = deque(maxlen=RECENT)
        self._since = time.perf_counter()  # when the builder last took the CPU
        self._spent = 0.0  # the build in progress: its parts' time so far
        self._greenlet = gevent.spawn(self._fill, make)

    @property
    def slack(self) -> float:
        """How long before a send the builder must be still."""
        return min(MAX_SLACK, max(MIN_SLACK, 2 * max(self._parts, default=0.0)))

    def _pause(self) -> None:
        now = time.perf_counter()
        part = now - self._since
        self._parts.append(part)
        self._spent += part
        gevent.sleep(0)
        self._quiet.wait()
        self._since = time.perf_counter()

    def _full(self) -> bool:
        first = self._ready[0].intended if self._ready else None
        far = first is not None and first - time.time() > HORIZON
        return len(self._ready) >= COUNT or self._bytes >= SIZE or far

    def _fill(self, make: Callable[[Callable[[], None]], Iterator[T]]) -> None:
        built = make(self._pause)
        while True:
            self._since, self._spent = time.perf_counter(), 0.0
            item = next(built, None)
            if item is None:
                break
            self._pause()  # the last part's time, and never straight on into the next build
            item.prepare_s = self._spent
            self._ready.append(item)
            self._bytes += item.size
            self._have.set()
            while self._full():
                self._room.clear()
                self._room.wait(timeout=1.0)  # the horizon moves with the clock, not only with takes
        self._exhausted = True
        self._have.set()

    def next(self) -> T | None:
        """The next request built (waiting for it, the builder let run), None when there is none."""
        while not self._ready:
            if self._exhausted:
                return None
            self._quiet.set()
            self._have.clear()
            self._have.wait()
        item = self._ready.popleft()
        self._bytes -= item.size
        self._room.set()
        return item

    def until(self, t: float) -> None:
        """Let the builder run until `slack` before unix time `t`, then hold it still."""
        if (wait := t - time.time() - self.slack) > 0:
            self._quiet.set()
            gevent.sleep(wait)
        self._quiet.clear()

    def waiting(self) -> list[T]:
        """The requests built and not taken, in order."""
        return list(self._ready)

    def stop(self) -> None:
        self._greenlet.kill()
