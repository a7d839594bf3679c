"""The statistics of a comparison, for requests that are correlated in time.

Requests of one run are not independent: a burst fills the server's queue and every request in it
is slow together. So nothing here treats requests as exchangeable. Within a run the unit is a time
block (`dashboards.comparison.blocks` chooses its length from the data): a percentile's or a rate's standard
error comes from a bootstrap that resamples whole blocks (Künsch's block bootstrap), and its
reference distribution is Student's t with one degree of freedom fewer than the blocks. With
repetitions the unit is the run (Welch's t on per-run values, each run's variance floored at its
own block-bootstrap variance). Percentiles are compared on the log scale (a ratio), rates on the
absolute one. The p-values of every cell compared are adjusted together (Holm by default, or
Benjamini-Hochberg), and every estimate carries the smallest change its data could have detected.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special  # Student's t and the normal, without scipy.stats's second of imports

BOOTSTRAP = 400  # resamples: enough for a standard error within ~4 %


@dataclass(frozen=True)
class Estimate:
    """One side's statistic on the test's scale (log of a percentile, or a rate), its standard
    error, and the degrees of freedom of its reference distribution."""

    value: float
    se: float
    df: float

    @classmethod
    def of_runs(cls, values: Sequence[float], variances: Sequence[float], dfs: Sequence[float]) -> Estimate:
        """Runs as units: the mean of per-run values, its variance from their spread (n - 1 degrees
        of freedom), or, where the runs agree more closely than each is measured, from the mean
        within-run (bootstrap) variance and its degrees of freedom: two runs that happen to agree
        do not look exact."""
        n = len(values)
        if n == 1:
            return cls(values[0], math.sqrt(variances[0]), dfs[0])
        spread, within = float(np.var(values, ddof=1)), float(np.mean(variances))
        if spread >= within:
            return cls(float(np.mean(values)), math.sqrt(spread / n), n - 1)
        return cls(float(np.mean(values)), math.sqrt(within / n), float(sum(dfs)))


@dataclass(frozen=True)
class Difference:
    """B minus A on the test's scale, with its standard error, degrees of freedom and two-sided
    p-value."""

    value: float
    se: float
    df: float
    p: float

    def interval(self, level: float) -> tuple[float, float]:
        half = t_quantile(1 - (1 - level) / 2, self.df) * self.se
        return self.value - half, self.value + half


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile; degrees of freedom rounded down (wider, never narrower), the normal's
    beyond 1000."""
    return _t_quantile(q, math.floor(df) if df < 1000 else math.inf)


@functools.cache
def _t_quantile(q: float, df: float) -> float:
    return float(special.ndtri(q) if math.isinf(df) else special.stdtrit(max(df, 1), q))


def difference(a: Estimate, b: Estimate) -> Difference:
    """Welch's test of B - A: standard errors added in quadrature, Welch-Satterthwaite degrees of
    freedom, a two-sided p-value (1 where nothing varies and nothing differs)."""
    diff = b.value - a.value
    var = a.se**2 + b.se**2
    if var == 0:
        return Difference(diff, 0.0, math.inf, 1.0 if diff == 0 else 0.0)
    finite = [e for e in (a, b) if e.se > 0 and not math.isinf(e.df)]
    df = var**2 / sum(e.se**4 / e.df for e in finite) if finite else math.inf
    z = abs(diff) / math.sqrt(var)
    p = float(2 * (special.ndtr(-z) if math.isinf(df) else special.stdtr(df, -z)))
    return Difference(diff, math.sqrt(var), df, p)


def detectable(se: float, df: float, alpha: float, power: float) -> float:
    """The smallest true difference (on the test's scale) a two-sided test at level `alpha` finds
    with probability `power`, given this standard error."""
    return (t_quantile(1 - alpha / 2, df) + t_quantile(power, df)) * se


def block_weights(blocks: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How many times each block appears in each bootstrap resample: (resamples, blocks)."""
    return rng.multinomial(blocks, np.full(blocks, 1.0 / blocks), size=resamples).astype(np.float64)


def bootstrap_quantiles(
    counts: np.ndarray, edges: np.ndarray, pcts: Sequence[float], weights: np.ndarray
) -> np.ndarray:
    """Percentiles of each block-bootstrap resample: `counts` is (blocks, bins), bin i spanning
    edges[i]..edges[i+1]; returns (resamples, len(pcts)), each interpolated linearly within its
    bin (as Prometheus's histogram_quantile does)."""
    r = weights @ counts
    cum = np.cumsum(r, axis=1)
    rows, nbins = len(r), r.shape[1]
    # Every row's running counts on one ascending line (row k shifted by k * step): one search for all.
    step = float(cum[:, -1].max()) + 1.0
    line = (cum + step * np.arange(rows)[:, None]).ravel()
    out = np.empty((rows, len(pcts)))
    for j, p in enumerate(pcts):
        target = cum[:, -1] * (p / 100.0)
        flat = np.searchsorted(line, target + step * np.arange(rows) - 1e-9)
        idx = np.minimum(flat - nbins * np.arange(rows), nbins - 1)
        before = np.where(idx > 0, cum[np.arange(rows), idx - 1], 0.0)
        inside = r[np.arange(rows), idx]
        frac = np.clip((target - before) / np.where(inside > 0, inside, 1.0), 0.0, 1.0)
        out[:, j] = edges[idx] + frac * (edges[idx + 1] - edges[idx])
    return out


def quantiles(counts: np.ndarray, edges: np.ndarray, pcts: Sequence[float]) -> np.ndarray:
    """Percentiles of binned counts, (bins,) or (blocks, bins), interpolated within their bin."""
    total = np.atleast_2d(counts).sum(axis=0, keepdims=True)
    return bootstrap_quantiles(total, edges, pcts, np.ones((1, 1)))[0]


def bootstrap_ratio(num: np.ndarray, den: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ num / Σ den of each block-bootstrap resample (NaN where a resample has no denominator)."""
    d = weights @ den
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d > 0, (weights @ num) / np.where(d > 0, d, 1.0), np.nan)


def spread(resamples: np.ndarray) -> float:
    """A bootstrap standard error (NaN resamples left out)."""
    finite = resamples[np.isfinite(resamples)]
    return float(np.std(finite, ddof=1)) if len(finite) > 1 else math.inf


def effective_blocks(events: np.ndarray) -> float:
    """How many blocks effectively hold these events (Kish's effective count, (Σu)² / Σu²): as many
    as there are blocks when they are spread evenly, one when a single burst holds them all."""
    total, squares = float(events.sum()), float(np.square(events).sum())
    return total * total / squares if squares > 0 else 0.0


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error rate)."""
    order = np.argsort(p, kind="stable")
    m, adjusted, running = len(p), [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(p: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg step-up adjusted p-values (false discovery rate)."""
    order = np.argsort(p, kind="stable")[::-1]
    m, adjusted, running = len(p), [0.0] * len(p), 1.0
    for k, i in enumerate(order):
        running = min(running, p[i] * m / (m - k))
        adjusted[i] = running
    return adjusted


CORRECTIONS = {"holm": holm, "bh": benjamini_hochberg}
CORRECTION_NAMES = {
    "holm": "Holm step-down (family-wise error rate)",
    "bh": "Benjamini-Hochberg (false discovery rate)",
}
