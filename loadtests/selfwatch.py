"""The load generator watches itself: its CPU use, how late its event loop runs and how late it
takes what the kernel already holds.

A generator that saturates measures its own queueing, not the target's: such a run is marked
invalid in run.json and says why at the end. One whose reads fall behind stamps several events with
one kernel receive time, losing the gaps between them: counted here, and turned into an error bar on
TTFT and ITL (llmchaos/bounds.py), which makes the run invalid only where it matters. Several events
in one read taken on time are the network's doing (a burst, a proxy's hold): a property of the
stream, counted per phase and reported, never held against the generator.
"""

from __future__ import annotations

import time
from typing import Any

import gevent

from loadtests import dataplane
from loadtests.record import RequestRecord

CPU_LIMIT = 0.90  # of one core, mean over the run
LAG_LIMIT_S = 0.020  # loop lag p95: the loop is late this often, not once at spawn
TICK_S = 0.1
STARTUP_TICKS = 10  # the first second's ticks (imports, users spawning) judge nothing
LAG_MIN_SAMPLES = 20  # fewer ticks after start-up (2 s at an idle loop's pace): too few for a p95
CPU_MIN_SAMPLES = 2  # fewer CPU samples (each over the ~1 s since the one before): too few for a mean


class SelfWatch:
    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.lags: list[float] = []
        self.reads = self.coalesced = self.late = 0
        self.phases: dict[str, list[int]] = {}  # phase -> [reads, coalesced, late]
        self._ticks = 0
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _run(self) -> None:
        """Ticks: each one's lateness, and the CPU used over every ten (the process's CPU clock, which
        needs no file: a generator out of file descriptors is still watched)."""
        cpu_from, wall_from = time.process_time(), time.perf_counter()
        while True:
            t = time.perf_counter()
            gevent.sleep(TICK_S)
            self._ticks += 1
            now = time.perf_counter()
            if self._ticks > STARTUP_TICKS:  # start-up: its lag is the spawning's, not the run's
                self.lags.append(max(0.0, now - t - TICK_S))
            if self._ticks % 10 == 0:
                used = time.process_time()
                if self._ticks > STARTUP_TICKS:
                    self.cpu.append((used - cpu_from) / (now - wall_from))
                cpu_from, wall_from = used, now

    def count(self, rec: RequestRecord) -> None:
        """A finished request's reads, in its phase."""
        self.reads += rec.reads
        self.coalesced += rec.coalesced_reads
        self.late += rec.late_reads
        row = self.phases.setdefault(rec.phase, [0, 0, 0])
        row[0] += rec.reads
        row[1] += rec.coalesced_reads
        row[2] += rec.late_reads

    def drain(self) -> dict[str, Any]:
        """The samples and counts since the last drain (lists grow and counts add when merged)."""
        out = {
            "cpu": self.cpu,
            "lags": self.lags,
            "reads": self.reads,
            "coalesced": self.coalesced,
            "late": self.late,
            "phases": [[phase, *row] for phase, row in self.phases.items()],
            "planes": sorted(dataplane.used),
        }
        self.cpu, self.lags, self.reads, self.coalesced, self.late, self.phases = [], [], 0, 0, 0, {}
        return out


def verdict(per_process: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Summarise every process's samples; flag a saturated generator, with a line naming only the
    figures over their limits. A figure needs its minimum of samples to judge by (`unjudged` names
    those without); reads are summed per process and per phase (late ones are judged by the error
    bar they leave, llmchaos/bounds.py)."""
    procs, flags, reasons, unjudged = {}, [], [], []
    total: dict[str, Any] = {"reads": 0, "coalesced": 0, "late": 0}
    phases: dict[str, list[int]] = {}
    for name, s in per_process.items():
        lags = sorted(s["lags"])
        p95, p99 = (lags[min(len(lags) - 1, int(q * len(lags)))] if lags else 0.0 for q in (0.95, 0.99))
        cpu = sum(s["cpu"]) / len(s["cpu"]) if s["cpu"] else 0.0
        reads, coalesced, late = s.get("reads", 0), s.get("coalesced", 0), s.get("late", 0)
        for key, n in (("reads", reads), ("coalesced", coalesced), ("late", late)):
            total[key] += n
        for phase, *row in s.get("phases", []):
            sums = phases.setdefault(phase, [0, 0, 0])
            for i, n in enumerate(row):
                sums[i] += n
        procs[name] = {
            "cpu_mean": round(cpu, 3),
            "cpu_max": round(max(s["cpu"], default=0.0), 3),
            "cpu_samples": len(s["cpu"]),
            "loop_lag_p95_s": round(p95, 4),
            "loop_lag_p99_s": round(p99, 4),
            "loop_lag_max_s": round(max(lags, default=0.0), 4),
            "loop_lag_samples": len(lags),
            "reads": reads,
            "coalesced_reads": coalesced,
            "late_reads": late,
            "plane": "+".join(sorted(set(s.get("planes", [])))) or "none",  # the data planes its clients read on
        }
        over = []
        if len(s["cpu"]) >= CPU_MIN_SAMPLES and cpu >= CPU_LIMIT:
            over.append(f"CPU {cpu:.2f} of a core (limit {CPU_LIMIT:g})")
        if len(lags) >= LAG_MIN_SAMPLES and p95 >= LAG_LIMIT_S:
            over.append(f"loop lag p95 {p95 * 1000:.1f} ms (limit {LAG_LIMIT_S * 1000:g})")
        if over:
            flags.append(f"generator_saturated:{name}")
            reasons.append(f"{name}: " + ", ".join(over))
        unseen = [
            f"{what} ({n} samples, needs {least})"
            for what, n, least in (("CPU", len(s["cpu"]), CPU_MIN_SAMPLES), ("loop lag", len(lags), LAG_MIN_SAMPLES))
            if n < least
        ]
        if unseen:
            unjudged.append(f"{name}: " + ", ".join(unseen))
    total["phases"] = [{"phase": p, "reads": r, "coalesced": c, "late": n} for p, (r, c, n) in sorted(phases.items())]
    return {"processes": procs, "flags": flags, "reasons": reasons, "unjudged": unjudged, "reads": total}
