"""The wake-up noise probe (tests/noise.py) against a stall the test makes itself."""

import os
import signal
import time

from tests.noise import TICK_S, WakeNoise


def test_a_stopped_probe_reports_at_least_the_stop():
    with WakeNoise() as noise:
        assert noise._proc is not None
        os.kill(noise._proc.pid, signal.SIGSTOP)
        time.sleep(0.2)
        os.kill(noise._proc.pid, signal.SIGCONT)
        time.sleep(0.01)
    assert noise.worst >= 0.2 - TICK_S  # the stop may fall in a sleep already under way
