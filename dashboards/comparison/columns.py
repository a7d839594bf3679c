"""A run's requests as columns: per metric, every value with its time and its (lang, phase) cell;
per request, whether it was issued, failed and met its language's SLO.

Read once from requests.jsonl through the core's run model. A value's time is its request's
intended start. ITL is each request's gaps spread over the tokens of the events they delivered
(`RequestLine.itl`, the same samples the run's histograms hold).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from llmchaos import slo
from llmchaos.run import RequestLine, Run
from llmchaos.units import duration

DISTRIBUTIONS = ("ttft", "ttfa", "itl", "inter_chunk", "tpot", "e2e", "output_tokens", "reasoning_tokens")
MIN_VALUE = 1e-6  # a latency of 0 is recorded as the histograms' smallest unit


@dataclass
class Column:
    """One metric's values: time, value, weight (how many samples it stands for), cell index."""

    t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    v: np.ndarray = field(default_factory=lambda: np.zeros(0))
    w: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cell: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.t, self.v, self.w, self.cell


@dataclass
class Columns:
    """One run's requests by column. `cells` names each (lang, phase) index; `requests` has one
    entry per request issued (those the end of the test cancelled are not issued) with its flags."""

    start: float
    end: float
    cells: list[tuple[str, str]] = field(default_factory=list)
    metrics: dict[str, Column] = field(default_factory=lambda: {m: Column() for m in DISTRIBUTIONS})
    requests: Column = field(default_factory=Column)  # v: 1 failed / 0 ok; w: 1 met its SLO / 0 not
    spans: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # phase -> when it was on
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)  # (lang, outcome) -> requests
    _index: dict[tuple[str, str], int] = field(default_factory=dict)

    def cell(self, lang: str, phase: str) -> int:
        i = self._index.get((lang, phase))
        if i is None:
            i = self._index[(lang, phase)] = len(self.cells)
            self.cells.append((lang, phase))
        return i


@dataclass
class _Lines:
    """The fields of every issued request, appended as read (one C append each: a run holds
    millions), turned into columns at once by `_fill`."""

    cell: array = field(default_factory=lambda: array("i"))
    t: array = field(default_factory=lambda: array("d"))
    ok: array = field(default_factory=lambda: array("b"))
    ttft: array = field(default_factory=lambda: array("d"))  # NaN: none
    ttfa: array = field(default_factory=lambda: array("d"))  # NaN: no answer token
    thinking: array = field(default_factory=lambda: array("d"))  # reasoning tokens; NaN: no thinking seen
    e2e: array = field(default_factory=lambda: array("d"))
    tokens: array = field(default_factory=lambda: array("d"))
    streamed: array = field(default_factory=lambda: array("d"))  # the tokens the events delivered (TPOT's)
    n_gaps: array = field(default_factory=lambda: array("i"))
    gaps: array = field(default_factory=lambda: array("d"))
    gap_tokens: array = field(default_factory=lambda: array("d"))  # tokens the event after each gap delivered


def read(run: Run, lines: Iterable[RequestLine]) -> Columns:
    """A run's requests as columns, with each phase's spans of time (for goodput)."""
    start, end = _unix(run.start), _unix(run.end)
    cols = Columns(start, end, spans=spans(run, start, end))
    raw, nan, outcomes = _Lines(), math.nan, Counter[tuple[str, str]]()
    for r in lines:
        outcomes[(r.lang, r.outcome)] += 1
        if r.at_stop:
            continue
        raw.cell.append(cols.cell(r.lang, r.phase))
        raw.t.append(r.intended)
        raw.ok.append(r.outcome == "ok")
        raw.ttft.append(nan if r.ttft is None else r.ttft)
        raw.ttfa.append(nan if r.ttfa is None else r.ttfa)
        raw.thinking.append(nan if r.reasoning_tokens is None else r.reasoning_tokens)
        raw.e2e.append(nan if r.e2e is None else r.e2e)
        raw.tokens.append(r.output_tokens)
        raw.streamed.append(r.output_tokens - r.unstreamed_tokens)
        raw.n_gaps.append(len(r.gaps))
        raw.gaps.extend(r.gaps)
        if r.gaps:
            raw.gap_tokens.extend(r.event_tokens()[1:])
    cols.outcomes = dict(outcomes)
    limits = {row.lang: {c.slo: c.threshold_ms for c in row.checks} for row in run.slo}
    _fill(cols, raw, [limits.get(lang, {}) for lang, _ in cols.cells])
    return cols


def _fill(cols: Columns, raw: _Lines, limits: list[dict[str, float]]) -> None:
    """Every column from the requests' fields: TPOT, each request's longest gap and whether it met
    its language's SLO (`slo.attained`, on every request at once), ITL from the gaps."""
    cell, t, tokens = (np.frombuffer(a, dtype=d) for a, d in ((raw.cell, np.int32), (raw.t, None), (raw.tokens, None)))
    streamed = np.frombuffer(raw.streamed)
    ok = np.frombuffer(raw.ok, dtype=np.int8).astype(bool)
    ttft, e2e = np.frombuffer(raw.ttft), np.frombuffer(raw.e2e)
    n_gaps, gaps = np.frombuffer(raw.n_gaps, dtype=np.int32), np.frombuffer(raw.gaps)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(ok & (streamed >= 2), (e2e - ttft) / (streamed - 1), np.nan)
    first = np.concatenate([[0], np.cumsum(n_gaps)[:-1]]).astype(np.int64)
    max_gap = np.zeros(len(t))
    has = n_gaps > 0
    if len(gaps):
        max_gap[has] = np.maximum.reduceat(gaps, first[has])
    met = np.zeros(len(t), dtype=bool)
    for i, lim in enumerate(limits):
        mine = cell == i
        met[mine] = slo.attained(
            lim, ok=ok[mine], ttft=ttft[mine], e2e=e2e[mine], tpot=tpot[mine], max_gap=max_gap[mine]
        )
    cols.requests = Column(t, (~ok).astype(np.float64), met.astype(np.float64), cell)
    ttfa, thinking = np.frombuffer(raw.ttfa), np.frombuffer(raw.thinking)
    each = (("ttft", ttft), ("ttfa", ttfa), ("e2e", e2e), ("tpot", tpot), ("output_tokens", tokens))
    for metric, v in (*each, ("reasoning_tokens", thinking)):
        keep = ok & np.isfinite(v)
        cols.metrics[metric] = Column(t[keep], np.maximum(v[keep], MIN_VALUE), np.ones(int(keep.sum())), cell[keep])
    per_request = np.repeat(ok, n_gaps)
    gt, gc = np.repeat(t, n_gaps)[per_request], np.repeat(cell, n_gaps)[per_request]
    g = np.maximum(gaps[per_request], MIN_VALUE)
    cols.metrics["inter_chunk"] = Column(gt, g, np.ones(len(g)), gc)
    per_event = np.frombuffer(raw.gap_tokens)[per_request]
    cols.metrics["itl"] = Column(gt, np.maximum(gaps[per_request] / per_event, MIN_VALUE), per_event, gc)


def spans(run: Run, start: float, end: float) -> dict[str, list[tuple[float, float]]]:
    """When each phase was on: warmup from the start, each fault window as it ran, baseline the rest."""
    warmup = duration(run.config.get("warmup") or 0, "config.warmup")
    out: dict[str, list[tuple[float, float]]] = {}
    if warmup > 0:
        out["warmup"] = [(start, min(end, start + warmup))]
    for w in run.faults:
        if w.actual_start is not None:
            out.setdefault(w.name, []).append((w.actual_start, w.actual_end if w.actual_end is not None else end))
    taken = sorted(s for spans in out.values() for s in spans)
    baseline, at = [], start
    for s, e in taken:
        if s > at:
            baseline.append((at, s))
        at = max(at, e)
    if at < end:
        baseline.append((at, end))
    out["baseline"] = baseline
    return out


def _unix(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp()
