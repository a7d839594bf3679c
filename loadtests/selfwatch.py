"""The load generator watches itself: its CPU use and how late its event loop runs.

A generator that saturates measures its own queueing, not the target's; such a run
is marked invalid in run.json and says so at the end.
"""

from __future__ import annotations

import time

import gevent
import psutil

CPU_LIMIT = 0.90  # of one core, mean over the run
LAG_LIMIT_S = 0.020  # loop lag p95: the loop is late this often, not once at spawn
TICK_S = 0.1


class SelfWatch:
    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.lags: list[float] = []
        self._proc = psutil.Process()
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None:
            self._proc.cpu_percent(None)
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _run(self) -> None:
        n = 0
        while True:
            t = time.perf_counter()
            gevent.sleep(TICK_S)
            self.lags.append(max(0.0, time.perf_counter() - t - TICK_S))
            n += 1
            if n % 10 == 0:
                self.cpu.append(self._proc.cpu_percent(None) / 100.0)

    def drain(self) -> dict:
        out = {"cpu": self.cpu, "lags": self.lags}
        self.cpu, self.lags = [], []
        return out


def verdict(per_process: dict[str, dict]) -> dict:
    """Summarise every process's samples; flag a saturated generator."""
    procs, flags = {}, []
    for name, s in per_process.items():
        lags = sorted(s["lags"])
        p95, p99 = (lags[min(len(lags) - 1, int(q * len(lags)))] if lags else 0.0 for q in (0.95, 0.99))
        cpu = sum(s["cpu"]) / len(s["cpu"]) if s["cpu"] else 0.0
        procs[name] = {
            "cpu_mean": round(cpu, 3),
            "cpu_max": round(max(s["cpu"], default=0.0), 3),
            "loop_lag_p95_s": round(p95, 4),
            "loop_lag_p99_s": round(p99, 4),
            "loop_lag_max_s": round(max(lags, default=0.0), 4),
        }
        if cpu >= CPU_LIMIT or p95 >= LAG_LIMIT_S:
            flags.append(f"generator_saturated:{name}")
    return {"processes": procs, "flags": flags}
