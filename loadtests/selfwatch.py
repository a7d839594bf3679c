"""The load generator watches itself: its CPU use, how late its event loop runs and how often its
reads of a stream bring several events at once.

A generator that saturates measures its own queueing, not the target's; one whose reads fall
behind stamps several events with one kernel receive time, losing the gaps between them. Such a
run is marked invalid in run.json and says why at the end.
"""

from __future__ import annotations

import time
from typing import Any

import gevent
import psutil

from loadtests.record import RequestRecord

CPU_LIMIT = 0.90  # of one core, mean over the run
LAG_LIMIT_S = 0.020  # loop lag p95: the loop is late this often, not once at spawn
COALESCED_LIMIT = 0.0075  # share of reads bringing several content events: each inflates one gap by a
# whole gap, so ITL p99 tips over near 1 % (benchmarks.generator_capacity: within 0.05 ms of the truth at
# 0.7 % or less; 3.2-4.9 ms off from 0.87 % on with the old client, 4.2-4.5 ms off at 1.2-1.8 % now)
COALESCED_MIN_READS = 1000  # fewer reads: too few to judge the share by
TICK_S = 0.1


class SelfWatch:
    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.lags: list[float] = []
        self.reads = self.coalesced = 0
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

    def count(self, rec: RequestRecord) -> None:
        """A finished request's reads."""
        self.reads += rec.reads
        self.coalesced += rec.coalesced_reads

    def drain(self) -> dict[str, Any]:
        out = {"cpu": self.cpu, "lags": self.lags, "reads": self.reads, "coalesced": self.coalesced}
        self.cpu, self.lags, self.reads, self.coalesced = [], [], 0, 0
        return out


def verdict(per_process: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Summarise every process's samples; flag a saturated generator and one whose reads coalesce,
    each with a line saying what was measured against which limit."""
    procs, flags, reasons = {}, [], []
    total = {"reads": 0, "coalesced": 0}
    for name, s in per_process.items():
        lags = sorted(s["lags"])
        p95, p99 = (lags[min(len(lags) - 1, int(q * len(lags)))] if lags else 0.0 for q in (0.95, 0.99))
        cpu = sum(s["cpu"]) / len(s["cpu"]) if s["cpu"] else 0.0
        reads, coalesced = s.get("reads", 0), s.get("coalesced", 0)
        share = coalesced / reads if reads else 0.0
        total["reads"] += reads
        total["coalesced"] += coalesced
        procs[name] = {
            "cpu_mean": round(cpu, 3),
            "cpu_max": round(max(s["cpu"], default=0.0), 3),
            "loop_lag_p95_s": round(p95, 4),
            "loop_lag_p99_s": round(p99, 4),
            "loop_lag_max_s": round(max(lags, default=0.0), 4),
            "reads": reads,
            "coalesced_reads": coalesced,
        }
        if cpu >= CPU_LIMIT or p95 >= LAG_LIMIT_S:
            flags.append(f"generator_saturated:{name}")
            reasons.append(
                f"{name}: CPU {cpu:.2f} of a core (limit {CPU_LIMIT:g}), "
                f"loop lag p95 {p95 * 1000:.1f} ms (limit {LAG_LIMIT_S * 1000:g})"
            )
        if reads >= COALESCED_MIN_READS and share >= COALESCED_LIMIT:
            flags.append(f"reads_coalesced:{name}")
            reasons.append(
                f"{name}: {100 * share:.1f} % of stream reads brought several events under one stamp "
                f"({coalesced} of {reads}; limit {100 * COALESCED_LIMIT:g} %)"
            )
    return {"processes": procs, "flags": flags, "reasons": reasons, "reads": total}
