"""A load level: what was measured at it, and the workload that replays it in virtual time.

Both sides are summed up alike: TTFT p50 and p90, per-token latency and, under overload, the
completion rate. Per-token latency is either (E2E p50 - TTFT p50) / (output tokens - 1), as published
curves give it, or the p50 of each request's (E2E - TTFT) / (output tokens - 1) (TPOT) from our own
runs, whose output lengths vary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reference_server.calibrate.virtual import Arrival, Served

PER_TOKEN = ("p50_difference", "tpot_p50")


@dataclass(frozen=True)
class Stats:
    ttft_p50: float | None = None  # seconds
    ttft_p90: float | None = None
    per_token: float | None = None
    throughput: float | None = None  # requests/s completed, under overload

    def items(self) -> list[tuple[str, float | None]]:
        return [(k, getattr(self, k)) for k in ("ttft_p50", "ttft_p90", "per_token", "throughput")]


@dataclass(frozen=True)
class Level:
    name: str  # e.g. "31 req/s"
    arrivals: tuple[Arrival, ...]
    measured: Stats
    per_token: str = "p50_difference"
    warmup: float = 0.0  # seconds of the start whose completions the throughput leaves out
    fit: bool = True  # held out: predicted, not fitted

    def simulated(self, served: list[Served]) -> Stats:
        """The same statistics of a virtual run (only those measured)."""
        ttft = np.array([s.ttft for s in served])
        e2e = np.array([s.e2e for s in served])
        out = np.array([s.output for s in served])
        m = self.measured
        per_token = None
        if m.per_token is not None:
            if self.per_token == "tpot_p50":
                long = out > 1
                per_token = float(np.median((e2e[long] - ttft[long]) / (out[long] - 1)))
            else:
                per_token = (float(np.median(e2e)) - float(np.median(ttft))) / (float(np.median(out)) - 1)
        throughput = None
        if m.throughput is not None:
            end = max(a.at for a in self.arrivals)
            done = [s.at + s.e2e for s in served]
            throughput = sum(self.warmup <= t <= end for t in done) / (end - self.warmup)
        return Stats(
            float(np.percentile(ttft, 50)) if m.ttft_p50 is not None else None,
            float(np.percentile(ttft, 90)) if m.ttft_p90 is not None else None,
            per_token,
            throughput,
        )


def errors(level: Level, simulated: Stats) -> list[float]:
    """Simulated over measured, minus 1, for each statistic measured."""
    return [
        s / m - 1.0 if s is not None and math.isfinite(s) else math.inf
        for (_, m), (_, s) in zip(level.measured.items(), simulated.items(), strict=True)
        if m is not None
    ]
