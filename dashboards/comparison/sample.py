"""One run reduced to what a comparison reads: for every (lang, metric, phase) cell, counts per time
block and value bin (percentiles) or per-block numerators and denominators (rates), and the
cell's exact figures.

Bins are log-spaced, `REL_WIDTH` wide, from the cell's 40th percentile up (everything lower shares
one bin: only percentiles from p50 up are compared), so a bootstrap resample's percentile is within
0.5 % of the exact one; the figures shown are the exact ones (the histograms', for a results
directory).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dashboards.comparison import blocks
from dashboards.comparison.blocks import Blocks
from dashboards.comparison.columns import Columns

PCTS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
COSTS = ("j_per_token", "usd_per_mtok")  # ratios of per-block sums too: run.json's energy over the tokens
RATES = ("error_rate", "slo_attainment", "goodput", *COSTS)
RATES_GROUP = "rates"
REL_WIDTH = 0.005
LOWEST_PCT = 40.0
EDGE_SAMPLE = 100_000


class CellKey(NamedTuple):
    lang: str
    metric: str
    phase: str


@dataclass(frozen=True)
class Binned:
    """A distribution cell: counts (blocks, bins), bin i spanning edges[i]..edges[i+1]; its exact
    percentiles by name (p50...); how many samples; how many blocks hold any."""

    counts: np.ndarray
    edges: np.ndarray
    exact: dict[str, float]
    n: float
    blocks: int

    def beyond(self, value: float) -> np.ndarray:
        """Per block, the samples above `value` (what a percentile there rests on)."""
        return self.counts[:, np.searchsorted(self.edges, value, side="right") - 1 :].sum(axis=1)


@dataclass(frozen=True)
class Ratio:
    """A rate cell: Σ num / Σ den over blocks; `n` requests issued; how many blocks hold any;
    whether `den` counts requests (then the rarer of num and den - num is what informs the rate)."""

    num: np.ndarray
    den: np.ndarray
    n: int
    blocks: int
    of_requests: bool = True

    @property
    def exact(self) -> float | None:
        d = float(self.den.sum())
        return float(self.num.sum()) / d if d > 0 else None

    def events(self) -> np.ndarray:
        """Per block, the events the rate's precision rests on (errors, misses, or met requests)."""
        if self.of_requests and self.num.sum() > (self.den - self.num).sum():
            return self.den - self.num
        return self.num


@dataclass(frozen=True)
class Known:
    """A cell a run holds only as exact figures, not as requests to resample (requests.jsonl sampled
    or empty: the histograms' percentiles, run.json's counts): shown, never tested; `why` says so."""

    exact: dict[str, float]  # percentiles by name, or {"rate": the rate}
    n: float
    why: str
    blocks: int = 0


Cell = Binned | Ratio | Known
Exact = Callable[[CellKey], dict[str, float] | None]  # a cell's exact percentiles, where known


@dataclass
class RunSample:
    """One run (or one Prometheus range) ready to compare: its time blocks per metric (`RATES_GROUP`
    for the rates), its cells."""

    name: str
    blocks: dict[str, Blocks]
    cells: dict[CellKey, Cell]
    notes: tuple[str, ...] = ()


def group(metric: str) -> str:
    """Which of a run's block sets a metric's cells are cut on."""
    return RATES_GROUP if metric in RATES else metric


def log_edges(v: np.ndarray) -> np.ndarray:
    """Edges from 0: one bin up to (about) the 40th percentile, then `REL_WIDTH`-wide log bins to the
    max. The lowest edge only bounds the bins, so an evenly strided 100,000 values set it."""
    lo = max(float(np.percentile(v[:: max(1, len(v) // EDGE_SAMPLE)], LOWEST_PCT)), 1e-9)
    hi = max(float(v.max()), lo * (1 + REL_WIDTH))
    n = math.ceil(math.log(hi / lo) / math.log1p(REL_WIDTH)) + 1
    return np.concatenate(([0.0], lo * (1 + REL_WIDTH) ** np.arange(n)))


def binned(block: np.ndarray, v: np.ndarray, w: np.ndarray, count: int, exact: dict[str, float]) -> Binned:
    edges = log_edges(v)
    nbins = len(edges) - 1
    with np.errstate(divide="ignore"):
        b = np.clip(np.log(v / edges[1]) * (1 / math.log1p(REL_WIDTH)) + 1, 0, nbins - 1).astype(np.int64)
    counts = np.bincount(block * nbins + b, weights=w, minlength=count * nbins).reshape(count, nbins)
    return Binned(counts, edges, exact, float(w.sum()), int((counts.sum(axis=1) > 0).sum()))


def nearest_rank(v: np.ndarray, w: np.ndarray, pcts: dict[str, float]) -> dict[str, float]:
    """Weighted percentiles as HDR histograms define them (so a run's requests give its histograms'
    figures): the value at rank round(p % of the total weight), at least 1."""
    total = float(w.sum())
    ranks = {name: max(math.floor(total * p / 100.0 + 0.5), 1) for name, p in pcts.items()}
    if np.all(w == 1.0):  # a request each: the value of rank r is the r-th smallest, found without a sort
        at = np.partition(v, sorted({min(r, len(v)) - 1 for r in ranks.values()}))
        return {name: float(at[min(r, len(v)) - 1]) for name, r in ranks.items()}
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    return {name: float(v[order[min(int(np.searchsorted(cum, r - 1e-9)), len(v) - 1)]]) for name, r in ranks.items()}


def reduce(
    name: str,
    cols: Columns,
    exact: Exact | None = None,
    notes: tuple[str, ...] = (),
    bl: dict[str, Blocks] | None = None,
) -> RunSample:
    """Every cell of a run's columns, on the given blocks or on blocks chosen from the data."""
    arrays = {m: c.arrays() for m, c in cols.metrics.items()}
    bl = bl or choose_blocks(cols, arrays)
    cells: dict[CellKey, Cell] = {}
    for metric, (t, v, w, c) in arrays.items():
        for i, (block, vi, wi) in by_cell(c, bl[metric].index(t), v, w):
            lang, phase = cols.cells[i]
            key = CellKey(lang, metric, phase)
            known = exact(key) if exact else None
            cells[key] = binned(block, vi, wi, bl[metric].count, known or nearest_rank(vi, wi, PCTS))
    cells.update(_rates(cols, bl[RATES_GROUP]))
    return RunSample(name, bl, cells, notes)


def choose_blocks(cols: Columns, arrays: Mapping[str, tuple[np.ndarray, ...]]) -> dict[str, Blocks]:
    """Each metric's blocks from its own series; the rates' from the longest any series asks for
    (the request counts' among them: whether a request fails or meets its SLO follows them all).
    Warmup is left out: a ramp is no memory."""
    grid = blocks.base(cols.start, cols.end)
    steady = np.array([phase != "warmup" for _, phase in cols.cells] or [False])
    t_req, _, _, c_req = cols.requests.arrays()
    every = bool(steady.all())

    def part(a: np.ndarray, cell: np.ndarray) -> np.ndarray:
        return a if every else a[steady[cell]]

    per = {m: blocks.bins_of(part(t, c), part(v, c), grid) for m, (t, v, _, c) in arrays.items()}
    per[RATES_GROUP] = max([blocks.bins_of(part(t_req, c_req), None, grid), *per.values()])
    return {m: blocks.choose(grid, n) for m, n in per.items()}


def by_cell(cell: np.ndarray, *arrays: np.ndarray) -> Iterator[tuple[int, list[np.ndarray]]]:
    """Each cell index present with its part of every array, in their order (one stable sort by cell,
    then slices: faster than a mask per cell, by 2.5x at 300,000 values and 16 cells)."""
    if not len(cell):
        return
    counts = np.bincount(cell)
    ends = np.cumsum(counts)
    order = np.argsort(cell, kind="stable") if len(counts) > 1 else slice(None)
    parts = [a[order] for a in arrays]
    for i in np.flatnonzero(counts):
        yield int(i), [a[ends[i] - counts[i] : ends[i]] for a in parts]


def _rates(cols: Columns, bl: Blocks) -> dict[CellKey, Cell]:
    t, failed, met, c = cols.requests.arrays()
    if not len(t):
        return {}
    ncells, k = int(c.max()) + 1, bl.count
    at = c.astype(np.int64) * k + bl.index(t)

    def per_block(weights: np.ndarray | None) -> np.ndarray:
        return np.bincount(at, weights=weights, minlength=ncells * k).reshape(ncells, k).astype(np.float64)

    issued, errors, met_k = per_block(None), per_block(failed), per_block(met)
    out: dict[CellKey, Cell] = {}
    for i in np.flatnonzero(issued.sum(axis=1)):
        lang, phase = cols.cells[i]
        n, used = int(issued[i].sum()), int((issued[i] > 0).sum())
        out[CellKey(lang, "error_rate", phase)] = Ratio(errors[i], issued[i], n, used)
        out[CellKey(lang, "slo_attainment", phase)] = Ratio(met_k[i], issued[i], n, used)
        seconds = on_time(bl, cols.spans.get(phase, [(cols.start, cols.end)]))
        out[CellKey(lang, "goodput", phase)] = Ratio(met_k[i], seconds, n, int((seconds > 0).sum()), False)
    return out


def on_time(bl: Blocks, spans: list[tuple[float, float]]) -> np.ndarray:
    """Seconds of each block inside the spans."""
    lo = bl.start + bl.width * np.arange(bl.count)
    hi = lo + bl.width
    out = np.zeros(bl.count)
    for s, e in spans:
        out += np.clip(np.minimum(hi, e) - np.maximum(lo, s), 0.0, None)
    return out
