"""The generator's watch on itself ticking on the wall clock: the first second's ticks (start-up) are
no samples (its verdict from the samples: tests/unit/loadtests/test_selfwatch.py)."""

from __future__ import annotations

import os
import resource
import time

import gevent
import pytest

from loadtests.selfwatch import STARTUP_TICKS, SelfWatch


def test_the_first_second_s_ticks_are_no_samples():
    # start-up (imports, users spawning) blocks the loop once: no verdict from it
    watch = SelfWatch()
    watch.start()
    try:
        time.sleep(0.25)  # the loop blocked during the first tick, as spawning blocks it
        while watch._ticks < STARTUP_TICKS + 3:
            gevent.sleep(0.05)
        ticks, lags = watch._ticks, list(watch.lags)
    finally:
        watch.stop()
    assert len(lags) == ticks - STARTUP_TICKS


def test_without_file_descriptors_the_watch_goes_on_and_measures_the_process_s_cpu():
    # defect 18 of issue 34: at `ulimit -n 120` with 200 users, reading /proc/<pid>/stat failed (EMFILE)
    # and the watch died, leaving run.json without CPU or loop-lag samples
    def half_busy() -> None:  # 20 ms of CPU, then 20 ms asleep
        while True:
            start = time.process_time()
            while time.process_time() - start < 0.02:
                pass
            gevent.sleep(0.02)

    watch, busy = SelfWatch(), gevent.spawn(half_busy)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))  # every new descriptor: EMFILE
    try:
        with pytest.raises(OSError, match="Too many open files"):
            open("/proc/self/stat").close()
        watch.start()
        gevent.sleep(0.01)
        while watch._ticks < STARTUP_TICKS:  # the samples begin after start-up
            gevent.sleep(0.01)
        cpu_from, wall_from = sum(os.times()[:2]), time.perf_counter()
        while len(watch.cpu) < 3:
            assert not watch._greenlet.dead, "the watch died"
            gevent.sleep(0.01)
        truth = (sum(os.times()[:2]) - cpu_from) / (time.perf_counter() - wall_from)  # the kernel's other account
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        watch.stop()
        busy.kill()
    assert len(watch.lags) >= 20
    assert truth > 0.05, truth  # the busy greenlet ran (idle: ~0.01; half busy on a loaded machine: 0.16)
    assert abs(sum(watch.cpu) / len(watch.cpu) - truth) < 0.05, (watch.cpu, truth)
