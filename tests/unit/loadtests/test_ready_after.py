"""When what an epoll pass reports became readable, at the earliest (the bound each read's `late`
starts from): a pass that slept saw it arrive, so no earlier than its wake-up (its return less its
wait for a CPU); a pass that did not sleep, no earlier than the pass before it looked. Held on a
real epoll and a pipe written at a known time, through the native `wait` and without it."""

from __future__ import annotations

import os
import select
import threading
import time

import pytest

from loadtests.dataplane import loop, native


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def write_after(fd: int, seconds: float) -> list[float]:
    """Write a byte `seconds` from now, in another thread; the list gets when (perf_counter)."""
    when: list[float] = []

    def go() -> None:
        time.sleep(seconds)
        when.append(time.perf_counter())
        os.write(fd, b"x")

    threading.Thread(target=go).start()
    return when


def test_a_pass_that_slept_bounds_from_its_wake_up_and_the_next_from_it(pipe):
    if not native.available():
        pytest.fail("the native plane is not built (make install builds loadtests/dataplane/_native.c)")
    from loadtests.dataplane import _native

    r, w = pipe
    poll = select.epoll()
    try:
        poll.register(r, select.EPOLLIN)
        began = time.perf_counter()
        written = write_after(w, 0.05)
        ready, after = _native.wait(poll.fileno(), 1.0, 8)
        returned = time.perf_counter()
        assert ready == [(r, select.EPOLLIN)]
        assert began + 0.04 < after <= written[0] + 0.001  # its wake-up, not its start 50 ms before
        assert after >= returned - 0.05  # at most the CPU wait and the slack before its return
        again, second = _native.wait(poll.fileno(), 0.0, 8)  # still readable: no sleep
        assert again == [(r, select.EPOLLIN)]
        assert second <= returned  # from the pass before: what it did not report came after it looked
        assert second == after
    finally:
        poll.close()


def test_without_the_native_wait_a_pass_is_bounded_by_the_one_before_it(monkeypatch, pipe):
    monkeypatch.setattr(loop, "_timed_wait", None)
    r, w = pipe
    plane = loop.Plane.__new__(loop.Plane)  # its pass alone, no thread
    plane._poll = select.epoll()
    plane.ready_after, plane._looked = 0.0, 0.0
    try:
        plane._poll.register(r, select.EPOLLIN)
        first = time.perf_counter()
        assert plane._pass(0.0) == []
        write_after(w, 0.03)
        assert plane._pass(1.0) == [(r, select.EPOLLIN)]
        assert first <= plane.ready_after <= first + 0.02  # the empty pass before it looked then
    finally:
        plane._poll.close()
