"""Time blocks of a run, long enough that what happens in one block says little about the next.

The run's span is cut into fine bins (`BASE_BINS`, at least `MIN_BIN_S` each); for each metric the
series of per-bin means (of log values) shows how long the server's state carries over — a queue
that fills in a burst keeps every request in it slow together — and the series of per-bin request
counts how long the offered load does (rates and goodput follow it). Politis and White's automatic
block length (from the flat-top-windowed autocorrelation, its cut-off lag by Politis's rule) is
taken for each series, and the run's block is the longest any of them asks for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BASE_BINS = 400
MIN_BIN_S = 0.25
MIN_BLOCKS = 8  # fewer independent blocks than this and a run says too little about its variance
MAX_BLOCKS = 100  # more add little to a standard error and cost a bootstrap time


@dataclass(frozen=True)
class Blocks:
    """`count` blocks of `width` seconds from `start`."""

    start: float
    width: float
    count: int

    def index(self, t: np.ndarray) -> np.ndarray:
        """Each time's block (times past the end fall into the last one)."""
        return np.clip(((t - self.start) * (1.0 / self.width)).astype(np.int64), 0, self.count - 1)

    def describe(self) -> str:
        return f"{self.count} blocks of {self.width:.3g} s"


def base(start: float, end: float) -> Blocks:
    width = max((end - start) / BASE_BINS, MIN_BIN_S)
    return Blocks(start, width, max(1, math.ceil((end - start) / width)))


def _autocorrelation(series: np.ndarray) -> np.ndarray:
    """The sample autocorrelation of a regular series (empty bins, NaN, at its mean); empty when
    nothing varies."""
    if not np.isfinite(series).any() or len(series) < 4:
        return np.zeros(0)
    x = np.nan_to_num(series, nan=float(np.nanmean(series)))
    if np.ptp(x) <= 1e-9 * (abs(float(x.mean())) + 1e-9):  # constant but for rounding
        return np.zeros(0)
    x = x - x.mean()
    denom = float(x @ x)
    spectrum = np.fft.rfft(x, 2 * len(x))
    return np.fft.irfft(spectrum * np.conj(spectrum))[: len(x)] / denom


def correlated_lag(acf: np.ndarray) -> int:
    """Politis's rule: the smallest lag m after which the autocorrelation stays within
    2·sqrt(log10(n)/n) for K = max(5, sqrt(log10 n)) lags."""
    n = len(acf)
    bound = 2 * math.sqrt(math.log10(n) / n)
    k = max(5, math.ceil(math.sqrt(math.log10(n))))
    small = np.abs(acf[1:]) < bound  # small[i]: lag i+1
    for m in range(n - 1):
        if small[m : m + k].all():
            return m
    return n


def block_bins(series: np.ndarray) -> int:
    """Politis and White's (2004; Patton et al. 2009) block length for a block bootstrap of this
    series, in its bins: (2 G² / D)^(1/3) n^(1/3) from flat-top-windowed autocorrelations."""
    acf = _autocorrelation(series)
    n = len(acf)
    if n == 0:
        return 1
    big_m = min(max(2 * correlated_lag(acf), 1), n - 1)
    lags = np.arange(-big_m, big_m + 1)
    window = np.clip(2 * (1 - np.abs(lags) / big_m), 0.0, 1.0)  # flat top: 1 to M/2, then down to 0 at M
    r = acf[np.abs(lags)]
    g = float((window * np.abs(lags) * r).sum())
    d = 4 / 3 * float((window * r).sum()) ** 2
    return max(1, math.ceil((2 * g * g / d) ** (1 / 3) * n ** (1 / 3))) if d > 0 else 1


def bins_of(t: np.ndarray, v: np.ndarray | None, grid: Blocks) -> int:
    """The block length, in `grid` bins, for the per-bin means of log values (or, without values,
    for the per-bin counts: how the arrival rate itself drifts)."""
    if len(t) == 0:
        return 1
    idx = grid.index(t)
    idx = idx - idx.min()  # the series spans these times only (not a warmup left out before them)
    n = np.bincount(idx).astype(np.float64)
    if v is None:
        return block_bins(n)
    s = np.bincount(idx, weights=np.log(np.maximum(v, 1e-9)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return block_bins(np.where(n > 0, s / np.where(n > 0, n, 1), np.nan))


def choose(grid: Blocks, per: int) -> Blocks:
    """Blocks of `per` grid bins (fewer when that would make more than `MAX_BLOCKS`) over the grid."""
    per = max(1, per, math.ceil(grid.count / MAX_BLOCKS))
    return Blocks(grid.start, grid.width * per, max(1, math.ceil(grid.count / per)))
