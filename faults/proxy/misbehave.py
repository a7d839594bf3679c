"""One event stream through a fault: its pieces released in order, each at its due time (see SSEFault),
some dropped, some with their text turned to garbage, the stream cut after N events."""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from typing import Protocol

from faults.proxy.corrupt import corrupt
from faults.proxy.events import Kind, Piece, Splitter
from faults.proxy.fault import SSEFault

QUEUE_MAX = 1024 * 1024  # bytes held before the upstream is paused (a long hold buffers this much)


class Body(Protocol):
    """Where the stream goes (the client's side of one exchange)."""

    def write(self, data: bytes) -> None: ...

    def end(self) -> None:
        """End the body (it is whole)."""

    def abort(self) -> None: ...

    def cut_upstream(self) -> None: ...

    def throttle(self, on: bool) -> None:
        """Pause (on) or resume reading from the upstream."""


async def _until(deadline: float) -> None:
    """Sleep until a monotonic deadline, never waking before it (loop timers may fire a bit early)."""
    while (delay := deadline - time.monotonic()) > 0:
        await asyncio.sleep(delay)


class Misbehave:
    def __init__(self, fault: SSEFault, rng: random.Random, out: Body) -> None:
        self.f, self.rng, self.out = fault, rng, out
        self.split, self.start = Splitter(), time.monotonic()
        self.queue: deque[tuple[float, Piece | None]] = deque()  # (arrival, piece); None: the end
        self.queued, self.complete = 0, True
        self.wake = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self.run())

    def feed(self, data: bytes) -> None:
        now = time.monotonic()
        for piece in self.split.feed(data):
            self.queue.append((now, piece))
            self.queued += len(piece.data)
        if self.queued > QUEUE_MAX:
            self.out.throttle(True)
        self.wake.set()

    def finish(self, complete: bool) -> None:
        """The upstream's answer ended (`complete`: whole, else cut): what is queued still goes out on
        time, then the body ends (or the client connection is cut)."""
        now, rest = time.monotonic(), self.split.finish()
        if rest is not None:
            self.queue.append((now, rest))
        self.queue.append((now, None))
        self.complete = complete
        self.wake.set()

    async def next(self) -> tuple[float, Piece | None]:
        while not self.queue:
            self.wake.clear()
            await self.wake.wait()
        arrived, piece = self.queue.popleft()
        if piece is not None:
            self.queued -= len(piece.data)
            if self.queued < QUEUE_MAX // 2:
                self.out.throttle(False)
        return arrived, piece

    async def run(self) -> bool:
        """Whether the body ended whole (rather than with the client connection cut)."""
        f, sent, link, dropped = self.f, 0, 0.0, False
        while True:
            arrived, piece = await self.next()
            if piece is None:
                if self.complete:
                    self.out.end()
                else:
                    self.out.abort()  # a cut upstream is a cut stream
                return self.complete
            if piece.kind is Kind.TAIL:  # the rest of the piece before: goes (or not) with it
                if not dropped:
                    self.out.write(piece.data)
                continue
            dropped = piece.kind is Kind.EVENT and f.drop_ratio > 0 and self.rng.random() < f.drop_ratio
            if dropped:
                continue
            data = piece.data
            if piece.kind is Kind.EVENT and f.corrupt_ratio > 0 and self.rng.random() < f.corrupt_ratio:
                data = corrupt(data, self.rng)  # its line ends kept: a TAIL after it still completes its CRLF
            due = max(arrived + f.first_event_delay, self.start + f.hold)
            if f.jitter:
                due += self.rng.uniform(0.0, f.jitter)
            if f.bandwidth:
                link = due = max(due, link) + len(data) / f.bandwidth
            await _until(due)
            self.out.write(data)
            sent += piece.kind in (Kind.EVENT, Kind.DONE)
            if f.cut_after and sent >= f.cut_after:
                self.out.cut_upstream()
                if f.reset:
                    self.out.abort()
                else:
                    self.out.end()
                return not f.reset
