"""The data plane: one native thread per process reads the bytes of every stream in flight.

Locust's greenlets keep the users, spawning, events and stats; each hands its request to the plane
and sleeps until the record is finished. The plane waits on all sockets with one epoll and a heap of
deadlines, so a read costs one wake-up and a few calls, not a greenlet switch and a timer. It is a
bare epoll loop rather than asyncio: Locust's monkey-patching swaps asyncio's selector for gevent's,
and each loop iteration here is the per-read cost this plane exists to cut.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import sys
from collections import deque
from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import Protocol

from gevent import monkey

try:
    from loadtests.dataplane._native import wait as _timed_wait
except ImportError:  # not built: each pass is bounded by the one before it (see Plane.ready_after)
    _timed_wait = None  # type: ignore[assignment]

_epoll = monkey.get_original("select", "epoll")
_start_thread = monkey.get_original("_thread", "start_new_thread")
EPOLLIN, EPOLLOUT, EPOLLRDHUP = 0x001, 0x004, 0x2000
IDLE_WAIT_S = 1.0  # the longest epoll wait with nothing due
STALE_SLACK = 64  # stale heap entries tolerated beyond twice the live ones
MAX_EVENTS = 1024  # reported by one pass at most (a full pass may leave out what was ready)
GIL_SWITCH_S = 0.0005  # a busy Locust thread hands the plane the GIL after this long (Python's default: 5 ms)


class Timed(Protocol):
    """What the plane gives up on at its deadline (perf_counter seconds; None: nothing due).
    `scheduled` is the plane's: the time of its entry in the heap (inf: none)."""

    deadline: float | None
    scheduled: float

    def expire(self, now: float) -> None: ...


class Watcher(Protocol):
    """What waits on a file descriptor: `ready` when it is, `crashed` when `ready` raised (a bug:
    the watcher ends what it was doing, the plane goes on with every other)."""

    def ready(self, events: int) -> None: ...

    def crashed(self, error: Exception) -> None: ...


class Plane:
    """An epoll loop on its own OS thread. Other threads only `call` it; everything else is the
    plane's own and runs on its thread."""

    def __init__(self) -> None:
        self._poll = _epoll()
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poll.register(self._wake, EPOLLIN)
        self._inbox: deque[Callable[[], None]] = deque()
        self._watchers: dict[int, Watcher] = {}
        self._heap: list[tuple[float, int, Timed]] = []
        self._seq = itertools.count()
        self._live = 0  # items with an entry in the heap
        # what this pass reported became readable no earlier (perf_counter): the native `wait` times it from
        # its wake-up (`_native.c`, timed_wait); without it, the last pass that came back short began then
        self.ready_after = 0.0
        self._looked = 0.0  # the last pass that came back short began then (without the native `wait`)
        sys.setswitchinterval(GIL_SWITCH_S)
        self.thread_id = _start_thread(self._run, ())

    # -- from any thread -----------------------------------------------------------------------------
    def call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the plane's thread, soon."""
        self._inbox.append(fn)
        os.eventfd_write(self._wake, 1)

    # -- on the plane's thread ---------------------------------------------------------------------
    def watch(self, fd: int, mask: int, watcher: Watcher) -> None:
        """Call `watcher.ready(events)` when `fd` is ready for `mask` (EPOLLIN, EPOLLOUT)."""
        if fd in self._watchers:
            self._poll.modify(fd, mask)
        else:
            self._poll.register(fd, mask)
        self._watchers[fd] = watcher

    def unwatch(self, fd: int) -> None:
        if self._watchers.pop(fd, None) is not None:
            self._poll.unregister(fd)

    def due(self, item: Timed) -> None:
        """Expire `item` once its deadline passes. Only a deadline earlier than the entry the item
        has makes a new one; a later one is found when that entry comes up and put back then."""
        deadline = item.deadline
        if deadline is not None and deadline < item.scheduled:
            if item.scheduled == math.inf:
                self._live += 1
            item.scheduled = deadline
            heapq.heappush(self._heap, (deadline, next(self._seq), item))

    def forget(self, item: Timed) -> None:
        """`item` has nothing due any more: its entry goes stale, and the heap is rebuilt without
        stale entries once they outnumber the live ones (a request's limit lies minutes ahead:
        left in place, every finished request would be kept that long)."""
        item.deadline = None
        if item.scheduled != math.inf:
            item.scheduled = math.inf
            self._live -= 1
        if len(self._heap) > 2 * self._live + STALE_SLACK:
            self._heap = [e for e in self._heap if e[0] == e[2].scheduled]
            heapq.heapify(self._heap)

    @property
    def entries(self) -> int:
        """Entries in the deadline heap, live and stale."""
        return len(self._heap)

    def _drain_inbox(self) -> None:
        os.eventfd_read(self._wake)
        while self._inbox:
            _guarded(self._inbox.popleft())

    def _expire(self, now: float) -> float:
        """Expire what is due; the seconds until the next deadline."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, _, item = heapq.heappop(heap)
            if when != item.scheduled:  # an entry an earlier one replaced
                continue
            deadline = item.deadline
            if deadline is not None and deadline > now:
                item.scheduled = deadline
                heapq.heappush(heap, (deadline, next(self._seq), item))
                continue
            item.scheduled = math.inf
            self._live -= 1
            if deadline is not None:
                _guarded(partial(item.expire, now))
        return min(heap[0][0] - now, IDLE_WAIT_S) if heap else IDLE_WAIT_S

    def _pass(self, wait: float) -> list[tuple[int, int]]:
        """One epoll wait, `ready_after` set for what it reports."""
        if _timed_wait is not None:
            ready, self.ready_after = _timed_wait(self._poll.fileno(), wait, MAX_EVENTS)
            return ready
        began = perf_counter()
        ready = self._poll.poll(wait, MAX_EVENTS)
        self.ready_after = self._looked
        if len(ready) < MAX_EVENTS:
            self._looked = began
        return ready

    def _run(self) -> None:
        watchers, wake = self._watchers, self._wake
        wait = IDLE_WAIT_S
        while True:
            for fd, events in self._pass(wait):
                if fd == wake:
                    self._drain_inbox()
                    continue
                watcher = watchers.get(fd)
                if watcher is not None:
                    try:
                        watcher.ready(events)
                    except Exception as e:  # noqa: BLE001 - a bug in one exchange must not stop every stream
                        sys.excepthook(type(e), e, e.__traceback__)
                        watcher.crashed(e)
            wait = self._expire(perf_counter())


def _guarded(fn: Callable[[], None]) -> None:
    """Run `fn` on the plane's thread; a bug in it is reported, and the plane goes on."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the plane's thread must outlive any one request
        sys.excepthook(type(e), e, e.__traceback__)


_plane: Plane | None = None
_lock = monkey.get_original("_thread", "allocate_lock")()


def _forget() -> None:
    """A forked child (Locust's --processes) has no plane thread: it starts its own."""
    global _plane, _lock
    _plane, _lock = None, monkey.get_original("_thread", "allocate_lock")()


os.register_at_fork(after_in_child=_forget)


def plane() -> Plane:
    """This process's plane, started on first use."""
    global _plane
    if _plane is None:
        with _lock:
            if _plane is None:
                _plane = Plane()
    return _plane
