"""loadtests/locustfile.py in a generator overloaded by its own process, on one CPU: a thread at a
real-time priority holds that CPU ~10 ms at a time (and the interpreter with it), so either data
plane reads late what the kernel already holds (the native one needs no interpreter: only the CPU
held from it makes it late). For the validity tests only (needs CAP_SYS_NICE: root)."""

from __future__ import annotations

import os
import time

from gevent import monkey

from loadtests.locustfile import *  # noqa: F403  (the user classes and the shape, as Locust finds them)

_start_thread = monkey.get_original("_thread", "start_new_thread")
_sleep = monkey.get_original("time", "sleep")
HOLD_S, REST_S = 0.010, 0.002

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # every thread started from now on shares it


def _hog() -> None:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # this thread only
    while True:
        until = time.perf_counter() + HOLD_S
        while time.perf_counter() < until:
            pass
        _sleep(REST_S)


_start_thread(_hog, ())
