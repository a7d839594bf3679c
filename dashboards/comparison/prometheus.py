"""Both sides of a comparison read from Prometheus: the `llmchaos_*` histograms and request counters
the exporters pushed or served, for a selector and a time range each.

Each metric's bucket counters are read at every `step` over the range (one query_range per metric,
summed by lang, phase and le); a step's increase is one time block (counter resets are taken as
restarts from zero), so the same block bootstrap applies as to a results directory. The values are
Prometheus's bucket edges, far coarser than a run's histograms: a percentile is interpolated
linearly within its bucket (as histogram_quantile does), and the output says so. The error rate
comes from `llmchaos_requests_total` (cancelled requests left out: the counter cannot tell the ones
the end of a test cut short), SLO attainment from `llmchaos_slo_met_total` over
`llmchaos_slo_issued_total`; goodput (met per second of each phase) is not compared: Prometheus does
not say when a phase was on.
"""

from __future__ import annotations

import argparse
import math
from datetime import datetime
from typing import Any

import httpx
import numpy as np

from dashboards.comparison import blocks
from dashboards.comparison.blocks import Blocks
from dashboards.comparison.bootstrap import quantiles
from dashboards.comparison.columns import DISTRIBUTIONS
from dashboards.comparison.sample import PCTS, RATES_GROUP, Binned, Cell, CellKey, Ratio, RunSample
from llmchaos.errors import UsageError
from llmchaos.metrics import METRICS, REQUESTS_TOTAL, SLO_ISSUED_TOTAL, SLO_MET_TOTAL

TIMEOUT_S = 30.0
STEPS = 100


def sides(args: argparse.Namespace) -> tuple[RunSample, RunSample]:
    if not args.a or not args.b:
        raise UsageError("give a selector for each side, e.g. --a 'target=\"http://a:8000\"'", field="--a/--b")
    if not args.range:
        raise UsageError("give the time range: --range START,END (RFC 3339 or unix seconds)", field="--range")
    span_a = _range(args.range, "--range")
    span_b = _range(args.range_b, "--range-b") if args.range_b else span_a
    return (
        read(args.prometheus, ",".join(args.a), span_a, args.step, "--a"),
        read(args.prometheus, ",".join(args.b), span_b, args.step, "--b"),
    )


def _range(text: str, flag: str) -> tuple[float, float]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2:
        raise UsageError(f"must be START,END, got {text!r}", field=flag)
    start, end = (_time(p, flag) for p in parts)
    if end <= start:
        raise UsageError(f"the end must come after the start, got {text!r}", field=flag)
    return start, end


def _time(text: str, flag: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UsageError(f"not a time (RFC 3339 or unix seconds): {text!r}", field=flag) from None


def read(url: str, selector: str, span: tuple[float, float], step: float | None, flag: str) -> RunSample:
    """One side: every (lang, metric, phase) cell the selector's series hold over the range."""
    sel = selector.strip().removeprefix("{").removesuffix("}")
    start, end = span
    step = step or max((end - start) / STEPS, 1.0)
    grid = Blocks(start, step, max(1, math.ceil((end - start) / step)))
    binned: dict[CellKey, tuple[np.ndarray, np.ndarray]] = {}
    for metric in DISTRIBUTIONS:
        query = f"sum by (lang, phase, le) ({METRICS[metric].prom}_bucket{{{sel}}})"
        by_cell: dict[tuple[str, str], dict[float, np.ndarray]] = {}
        for s in _query(url, query, start, end, step, flag):
            m = s["metric"]
            le = math.inf if m.get("le") == "+Inf" else float(m.get("le", "nan"))
            by_cell.setdefault((m.get("lang", ""), m.get("phase", "")), {})[le] = _increases(s["values"], grid)
        for (lang, phase), buckets in by_cell.items():
            les = sorted(buckets)
            cumulative = np.stack([buckets[e] for e in les], axis=1)  # (steps, le)
            counts = np.diff(cumulative, axis=1, prepend=0.0).clip(min=0.0)
            finite = [e for e in les if math.isfinite(e)]
            top = finite[-1] if finite else 1.0
            binned[CellKey(lang, metric, phase)] = (counts, np.array([0.0, *finite, top][: len(les) + 1]))
    per = {m: _block_steps({k: v for k, v in binned.items() if k.metric == m}) for m in DISTRIBUTIONS}
    per[RATES_GROUP] = max(per.values())
    bl = {m: blocks.choose(grid, n) for m, n in per.items()}
    cells: dict[CellKey, Cell] = {}
    for key, (counts, edges) in binned.items():
        merged = _merge_steps(counts, per[key.metric], bl[key.metric].count)
        if merged.sum() > 0:
            exact = dict(zip(PCTS, quantiles(merged, edges, list(PCTS.values())), strict=True))
            cells[key] = Binned(merged, edges, exact, float(merged.sum()), int((merged.sum(axis=1) > 0).sum()))
    cells.update(_errors(url, sel, grid, per[RATES_GROUP], bl[RATES_GROUP].count, flag))
    note = (
        f"{flag[2:].upper()} from Prometheus {url} {{{sel}}}: percentiles interpolated within the exporters' bucket "
        "edges (vLLM's and the SLO thresholds; far coarser than a run's histograms); no goodput"
    )
    return RunSample(f"prometheus {{{sel}}} {_iso(start)}..{_iso(end)}", bl, cells, (note,))


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _query(url: str, query: str, start: float, end: float, step: float, flag: str) -> list[dict[str, Any]]:
    try:
        r = httpx.get(
            url.rstrip("/") + "/api/v1/query_range",
            params={"query": query, "start": start, "end": end, "step": step},
            timeout=TIMEOUT_S,
        )
    except httpx.HTTPError as e:
        raise UsageError(f"cannot read Prometheus at {url}: {e}", field="--prometheus") from None
    try:
        body = r.json()
    except ValueError:
        raise UsageError(f"not a Prometheus API answer ({r.status_code})", field="--prometheus") from None
    if r.status_code != 200 or body.get("status") != "success":
        raise UsageError(f"Prometheus refused {query!r}: {body.get('error', r.status_code)}", field=flag)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _increases(values: list[list[Any]], grid: Blocks) -> np.ndarray:
    """A counter's increase in each grid step: a series there at the range's start counts from its
    value then, one born later from zero; a drop is a restart from zero."""
    out = np.zeros(grid.count)
    last = None if values and float(values[0][0]) - grid.start < grid.width / 2 else 0.0
    for t, v in values:
        x = float(v)
        if last is not None:
            i = min(max(int((float(t) - grid.start) / grid.width - 1e-9), 0), grid.count - 1)
            out[i] += x - last if x >= last else x
        last = x
    return out


def _block_steps(binned: dict[CellKey, tuple[np.ndarray, np.ndarray]]) -> int:
    """Steps per block for one metric's cells, from the autocorrelation of each per-step mean (log
    bucket middles) over the steps that hold samples; warmup left out, as from a run's requests (a
    ramp is no memory)."""
    per = 1
    for key, (counts, edges) in binned.items():
        if key.phase == "warmup":
            continue
        mids = np.log(np.maximum((edges[:-1] + edges[1:]) / 2, 1e-9))
        n = counts.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            series = np.where(n > 0, (counts * mids).sum(axis=1) / np.where(n > 0, n, 1), np.nan)
        seen = np.flatnonzero(n > 0)
        if len(seen) >= 2 * blocks.MIN_BLOCKS:  # a shorter series cannot say how long a state lasts
            # The steps with samples only: an exporter that updates less often than the step leaves
            # steps empty in a rhythm that is no memory of the server's; scaled back to steps.
            span = seen[-1] - seen[0] + 1
            per = max(per, math.ceil(blocks.block_bins(series[seen]) * span / len(seen)))
    return per


def _merge_steps(counts: np.ndarray, per: int, count: int) -> np.ndarray:
    per = max(per, math.ceil(len(counts) / count))
    pad = (-len(counts)) % per
    padded = np.concatenate([counts, np.zeros((pad, *counts.shape[1:]))])
    return padded.reshape(-1, per, *counts.shape[1:]).sum(axis=1)


def _errors(url: str, sel: str, grid: Blocks, per: int, count: int, flag: str) -> dict[CellKey, Cell]:
    """Error rate per (lang, phase) from the request counter, and SLO attainment from the SLO
    counters (met over issued) where the exporters pushed them."""
    issued: dict[tuple[str, str], np.ndarray] = {}
    failed: dict[tuple[str, str], np.ndarray] = {}
    for m, inc in _increments(
        url, f"sum by (lang, phase, outcome) ({REQUESTS_TOTAL}{{{sel}}})", grid, per, count, flag
    ):
        if m.get("outcome") == "cancelled":
            continue
        k = (m.get("lang", ""), m.get("phase", ""))
        issued[k] = issued.get(k, 0) + inc
        if m.get("outcome") != "ok":
            failed[k] = failed.get(k, 0) + inc
    out: dict[CellKey, Cell] = {
        CellKey(lang, "error_rate", phase): _ratio(failed.get((lang, phase)), n) for (lang, phase), n in issued.items()
    }
    slo = {
        name: {(m.get("lang", ""), m.get("phase", "")): inc for m, inc in _increments(url, q, grid, per, count, flag)}
        for name, q in (
            (SLO_ISSUED_TOTAL, f"sum by (lang, phase) ({SLO_ISSUED_TOTAL}{{{sel}}})"),
            (SLO_MET_TOTAL, f"sum by (lang, phase) ({SLO_MET_TOTAL}{{{sel}}})"),
        )
    }
    for (lang, phase), n in slo[SLO_ISSUED_TOTAL].items():
        out[CellKey(lang, "slo_attainment", phase)] = _ratio(slo[SLO_MET_TOTAL].get((lang, phase)), n)
    return out


def _increments(
    url: str, query: str, grid: Blocks, per: int, count: int, flag: str
) -> list[tuple[dict[str, str], np.ndarray]]:
    """Each counter series of the query with its increase per block."""
    return [
        (s["metric"], _merge_steps(_increases(s["values"], grid), per, count))
        for s in _query(url, query, grid.start, grid.start + grid.width * grid.count, grid.width, flag)
    ]


def _ratio(num: np.ndarray | None, den: np.ndarray) -> Ratio:
    return Ratio(np.zeros_like(den) if num is None else num, den, int(den.sum()), int((den > 0).sum()))
