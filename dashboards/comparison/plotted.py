"""What the reports plot: each metric over a run's time (per language, percentiles per time bucket),
the fault windows as spans of that time, a histogram's CDF, and the order the run's phases came in."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dashboards.comparison.columns import Columns
from dashboards.comparison.sample import by_cell
from llmchaos.histogram import Histogram
from llmchaos.run import Run

BUCKETS = 60
CDF_POINTS = 300


def over_time(
    cols: Columns, metric: str, pct: float, buckets: int = BUCKETS
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Bucket mid-times (seconds from the run's start) and, per language, the metric's `pct`
    percentile in each bucket (NaN where a bucket has none), every phase together."""
    width = max(cols.end - cols.start, 1e-9) / buckets
    mids = (np.arange(buckets) + 0.5) * width
    col = cols.requests if metric == "error_rate" else cols.metrics[metric]
    t, v, w, c = col.arrays()
    out: dict[str, np.ndarray] = {}
    if not len(t):
        return mids, out
    langs = sorted({lang for lang, _ in cols.cells})
    lang_index = np.array([langs.index(lang) for lang, _ in cols.cells], dtype=np.int32)[c]
    bucket = np.clip(((t - cols.start) / width).astype(np.int64), 0, buckets - 1)
    for li, (b, vi, wi) in by_cell(lang_index, bucket, v, w):
        series = np.full(buckets, np.nan)
        for bi, (vals, weights) in by_cell(b.astype(np.int32), vi, wi):
            if metric == "error_rate":
                series[bi] = float(vals.mean())
            else:
                order = np.argsort(vals)
                cum = np.cumsum(weights[order])
                series[bi] = float(vals[order][min(np.searchsorted(cum, cum[-1] * pct / 100), len(vals) - 1)])
        out[langs[li]] = series
    return mids, out


def fault_spans(run: Run, start: float) -> list[tuple[float, float, str]]:
    """Each fault window as it ran, in seconds from `start` (one never applied is left out)."""
    end = start + run.duration_s
    return [
        (w.actual_start - start, (w.actual_end if w.actual_end is not None else end) - start, f"{w.name} ({w.kind})")
        for w in run.faults
        if w.actual_start is not None
    ]


def recovery_marks(run: Run, start: float) -> list[tuple[float, str]]:
    """Per fault window revert, where its slowest (language, SLO) was back within its SLO, in seconds
    from `start`, labelled; a window some language never came back from is marked at its revert."""
    by_revert: dict[tuple[str, float], list] = {}
    for r in run.recovery:
        if r.judged and r.reverted is not None:
            by_revert.setdefault((r.window, r.reverted), []).append(r)
    marks = []
    for (window, reverted), rows in sorted(by_revert.items(), key=lambda kv: kv[0][1]):
        never = [r for r in rows if r.recover_s is None]
        if never:
            who = ", ".join(sorted({f"{r.lang} {r.metric}" for r in never}))
            marks.append((reverted - start, f"{window} reverted; never back within the run: {who}"))
            continue
        r = max(rows, key=lambda r: r.recover_s or 0.0)
        marks.append(
            (
                reverted + (r.recover_s or 0.0) - start,
                f"{window}: all back +{r.recover_s:.1f} s after its revert (last: {r.lang} {r.metric})",
            )
        )
    return marks


def cdf(h: Histogram | None) -> tuple[list[float], list[float]]:
    """A histogram's CDF as at most `CDF_POINTS` (value, cumulative share) points."""
    if h is None or not h.count:
        return [], []
    hdr = h.hdr
    counts = np.frombuffer(hdr.counts, dtype=np.int64, count=hdr.counts_len)
    idx = np.flatnonzero(counts)
    shares = np.cumsum(counts[idx]) / h.count
    keep = np.unique(np.linspace(0, len(idx) - 1, min(len(idx), CDF_POINTS)).astype(np.int64))
    values = [hdr.get_highest_equivalent_value(hdr.get_value_from_index(int(i))) / h.scale for i in idx[keep]]
    return values, [float(x) for x in shares[keep]]


def phase_order(run: Run) -> Callable[[str], float]:
    """A phase's place in time: warmup, baseline, then a fault phase by the earliest start of the
    windows it names (`a+b`, `a:unconfirmed`); one no window names last."""
    starts: dict[str, float] = {}
    for w in run.faults:
        starts[w.name] = min(starts.get(w.name, math.inf), w.planned_start)

    def at(phase: str) -> float:
        if phase in ("warmup", "baseline"):
            return -2.0 if phase == "warmup" else -1.0
        return min((starts.get(n.removesuffix(":unconfirmed"), math.inf) for n in phase.split("+")), default=math.inf)

    return at
