"""Requests built ahead: in order, each with its build's own time, and no part of a build ever runs
between the dispatcher holding the builder and its send."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import gevent

from loadtests.replay import ahead
from loadtests.replay.ahead import Ahead


@dataclass
class Item:
    n: int
    intended: float
    parts: int
    prepare_s: float | None = None

    @property
    def size(self) -> int:
        return 1000 * self.parts


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_builds_run_only_while_no_send_is_near_and_each_keeps_its_time():
    t0, part_s = time.time() + 0.05, 0.002
    plan = [Item(i, t0 + 0.01 * i, parts=1 + 3 * (i % 3)) for i in range(24)]  # 1, 4 or 7 parts of 2 ms
    parts: list[tuple[float, float]] = []
    own: dict[int, float] = {}  # each item's parts, their time summed
    began: dict[int, float] = {}

    def make(pause: Callable[[], None]) -> Iterator[Item]:
        for item in plan:
            began[item.n] = time.time()
            own[item.n] = 0.0
            for _ in range(item.parts):
                start = time.time()
                spin(part_s)
                parts.append((start, time.time()))
                own[item.n] += parts[-1][1] - start
                pause()
            yield item

    queue = Ahead(make)
    got, quiet, taken = [], [], {}
    while (item := queue.next()) is not None:
        taken[item.n] = time.time()
        queue.until(item.intended)
        held = time.time()
        while time.time() < item.intended:
            gevent.sleep(0)  # what the dispatcher does: other greenlets run, the builder not
        quiet.append((held, time.time()))
        got.append(item)
    queue.stop()
    assert [i.n for i in got] == list(range(24))
    for i in got:  # its parts' time, within its build's span (which the holds may have stretched)
        assert i.prepare_s is not None
        assert own[i.n] <= i.prepare_s <= taken[i.n] - began[i.n]
    for held, sent in quiet:
        assert not [p for p in parts if p[0] < sent and p[1] > held], (held, sent)


def test_ready_requests_are_bounded_by_count(monkeypatch):
    monkeypatch.setattr(ahead, "COUNT", 3)
    built: list[int] = []

    def make(pause: Callable[[], None]) -> Iterator[Item]:
        for i in range(10):
            built.append(i)
            yield Item(i, time.time(), parts=1)

    queue = Ahead(make)
    gevent.sleep(0.05)
    assert len(built) == 3  # three ready: no more built until one is taken
    assert [queue.next().n for _ in range(10)] == list(range(10))  # type: ignore[union-attr]
    assert queue.next() is None
