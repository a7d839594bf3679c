"""The machine-noise probe (tests/noise.py) against a stall and a load the test makes itself."""

import os
import signal
import subprocess
import sys
import time

from tests.noise import TICK_S, WakeNoise


def test_a_stopped_probe_reports_at_least_the_stop():
    with WakeNoise() as noise:
        assert noise._proc is not None
        os.kill(noise._proc.pid, signal.SIGSTOP)
        time.sleep(0.2)
        os.kill(noise._proc.pid, signal.SIGCONT)
        time.sleep(0.01)
    assert noise.worst >= 0.2 - TICK_S  # a stop within a sleep: that sleep was due to end anyway


def test_busy_loops_on_every_core_count_as_contention():
    cores = os.cpu_count() or 1
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * cores)]
    try:
        time.sleep(0.2)
        with WakeNoise() as noise:
            time.sleep(0.5)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert noise.contention >= 1.0  # two loops a core: at least every core wanted all the time
