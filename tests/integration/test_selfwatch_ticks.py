"""The generator's watch on itself ticking on the wall clock: the first second's ticks (start-up) are
no samples (its verdict from the samples: tests/unit/loadtests/test_selfwatch.py)."""

from __future__ import annotations

import time

import gevent

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
