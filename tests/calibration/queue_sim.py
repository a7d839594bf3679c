"""Synthetic runs whose requests a queue correlates, for calibrating the comparison in-process.

Requests of every language arrive in one stream whose rate switches between calm and bursts
(a two-state Markov-modulated Poisson process); they wait in one FIFO admission queue (Lindley's
recursion, vectorised), so a burst makes every request in it slow together, whatever its
language. TTFT is the wait plus the language's own prefill time (log-normal); a request fails with
a small probability and meets its language's SLO when it succeeds within the TTFT objective.
`Sim.shifted` multiplies one language's TTFT above its own 98th percentile (a tail shift).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dashboards.comparison.blocks import Blocks
from dashboards.comparison.columns import Column, Columns
from dashboards.comparison.sample import RunSample, reduce

LANGS = {"en": 10, "de": 8, "fr": 8, "es": 8, "it": 7, "pt": 7, "zh": 6, "ja": 4}
PREFILL_MEDIAN_S = {
    "en": 0.050,
    "de": 0.065,
    "fr": 0.058,
    "es": 0.058,
    "it": 0.058,
    "pt": 0.058,
    "zh": 0.070,
    "ja": 0.080,
}
SLO_TTFT_S = {"en": 0.100, "de": 0.130, "fr": 0.120, "es": 0.120, "it": 0.120, "pt": 0.120, "zh": 0.150, "ja": 0.200}


@dataclass(frozen=True)
class Queue:
    requests: int = 200_000
    calm_rps: float = 400.0
    burst_rps: float = 900.0
    calm_s: float = 8.0
    burst_s: float = 2.0
    service_s: float = 0.001  # admission work per request: utilisation 0.4 calm, 0.9 in a burst
    prefill_sigma: float = 0.25
    failure: float = 0.002


def arrivals(q: Queue, rng: np.random.Generator) -> np.ndarray:
    """Arrival times of a Markov-modulated Poisson process (calm and burst states): exponential
    gaps at the state's rate, the state switching after exponential stays."""
    mean_rps = (q.calm_rps * q.calm_s + q.burst_rps * q.burst_s) / (q.calm_s + q.burst_s)
    horizon = q.requests / mean_rps * 1.3
    stays = rng.exponential(1.0, int(horizon / (q.calm_s + q.burst_s) * 2) + 16)
    stays *= np.resize([q.calm_s, q.burst_s], len(stays))  # calm, burst, calm, ...
    ends = np.cumsum(stays)
    # Time runs at the state's rate: unit-rate gaps, stretched back by each state's rate.
    rates = np.resize([q.calm_rps, q.burst_rps], len(stays))
    work = np.cumsum(stays * rates)  # expected arrivals by the end of each stay
    events = np.cumsum(rng.exponential(1.0, int(work[-1] * 1.1) + 100))
    events = events[events < work[-1]][: q.requests]
    state = np.searchsorted(work, events)
    before = np.concatenate(([0.0], work))[state]
    starts = np.concatenate(([0.0], ends))[state]
    return starts + (events - before) / rates[state]


def waits(arrive: np.ndarray, service: np.ndarray) -> np.ndarray:
    """FIFO waits by Lindley's recursion W[n] = max(0, W[n-1] + S[n-1] - (A[n] - A[n-1])), as
    X[n] - min(0, X[0..n]) of the running sum X of (S[n-1] - gap[n])."""
    x = np.concatenate(([0.0], np.cumsum(service[:-1] - np.diff(arrive))))
    return x - np.minimum.accumulate(np.minimum(x, 0.0))


@dataclass(frozen=True)
class Sim:
    """One simulated run's requests, by column."""

    t: np.ndarray
    lang: np.ndarray  # index into LANGS
    ttft: np.ndarray
    failed: np.ndarray

    def shifted(self, lang: str, factor: float) -> Sim:
        """This run with `lang`'s TTFT above its own 98th percentile multiplied by `factor` (its p99
        moves by that factor, its p50 to p95 stay)."""
        sel = self.lang == list(LANGS).index(lang)
        tail = sel & (self.ttft > np.percentile(self.ttft[sel], 98))
        return replace(self, ttft=np.where(tail, self.ttft * factor, self.ttft))

    def sample(self, bl: dict[str, Blocks] | None = None) -> RunSample:
        """The run as the comparison reads it (through the same columns a results directory gives),
        on its own blocks or on `bl` (a shifted copy keeps its run's)."""
        names = list(LANGS)
        t, ok = self.t, ~self.failed
        met = ok & (self.ttft <= np.array([SLO_TTFT_S[x] for x in names])[self.lang])
        cols = Columns(float(t[0]), float(t[-1]), spans={"baseline": [(float(t[0]), float(t[-1]))]})
        cells = np.array([cols.cell(x, "baseline") for x in names], dtype=np.int32)[self.lang]
        cols.metrics["ttft"] = Column(t[ok], self.ttft[ok], np.ones(int(ok.sum())), cells[ok])
        cols.requests = Column(t, self.failed.astype(np.float64), met.astype(np.float64), cells)
        for m in [m for m, c in cols.metrics.items() if not len(c.v)]:
            del cols.metrics[m]
        return reduce("sim", cols, bl=bl)


def simulate(q: Queue, rng: np.random.Generator) -> Sim:
    t = arrivals(q, rng)
    n = len(t)
    lang = rng.choice(len(LANGS), size=n, p=np.array(list(LANGS.values())) / sum(LANGS.values()))
    wait = waits(t, rng.exponential(q.service_s, n))
    median = np.array(list(PREFILL_MEDIAN_S.values()))[lang]
    ttft = wait + median * np.exp(rng.normal(0.0, q.prefill_sigma, n))
    return Sim(t, lang, ttft, rng.random(n) < q.failure)
