"""A run's requests as columns: per metric, every value with its time and its (lang, phase) cell;
per request, whether it was issued, failed and met its language's SLO.

Read once from requests.jsonl through the core's run model. A value's time is its request's
intended start. ITL is rebuilt from each request's gaps spread evenly over its output tokens
(requests.jsonl does not keep how many tokens each event carried; with one token per event, as
most servers stream, it is exact); its percentiles themselves always come from the histograms.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from llmchaos import slo
from llmchaos.run import RequestLine, Run
from llmchaos.units import duration

DISTRIBUTIONS = ("ttft", "itl", "inter_chunk", "tpot", "e2e", "output_tokens")
MIN_VALUE = 1e-6  # a latency of 0 is recorded as the histograms' smallest unit


@dataclass
class Column:
    """One metric's values: time, value, weight (how many samples it stands for), cell index."""

    t: array = field(default_factory=lambda: array("d"))
    v: array = field(default_factory=lambda: array("d"))
    w: array = field(default_factory=lambda: array("d"))
    cell: array = field(default_factory=lambda: array("i"))

    def add(self, t: float, v: float, cell: int, w: float = 1.0) -> None:
        self.t.append(t)
        self.v.append(v)
        self.w.append(w)
        self.cell.append(cell)

    def extend(self, t: float, values: list[float], cell: int, w: float = 1.0) -> None:
        n = len(values)
        self.t.extend([t] * n)
        self.v.extend(values)
        self.w.extend([w] * n)
        self.cell.extend([cell] * n)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (
            np.frombuffer(self.t, dtype=np.float64),
            np.frombuffer(self.v, dtype=np.float64),
            np.frombuffer(self.w, dtype=np.float64),
            np.frombuffer(self.cell, dtype=np.int32),
        )


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

    def add(self, r: RequestLine, limits: dict[str, float]) -> None:
        """One request line."""
        self.outcomes[(r.lang, r.outcome)] = self.outcomes.get((r.lang, r.outcome), 0) + 1
        if r.at_stop:
            return
        c, t, ok = self.cell(r.lang, r.phase), r.intended, r.outcome == "ok"
        n = r.output_tokens
        tpot = (r.e2e - r.ttft) / (n - 1) if ok and r.ttft is not None and r.e2e is not None and n >= 2 else None
        met = slo.attained(limits, ok=ok, ttft=r.ttft, e2e=r.e2e, tpot=tpot, max_gap=max(r.gaps, default=0.0))
        self.requests.add(t, 0.0 if ok else 1.0, c, 1.0 if met else 0.0)
        if not ok:
            return
        m = self.metrics
        if r.ttft is not None:
            m["ttft"].add(t, max(r.ttft, MIN_VALUE), c)
        if r.e2e is not None:
            m["e2e"].add(t, max(r.e2e, MIN_VALUE), c)
        if tpot is not None:
            m["tpot"].add(t, max(tpot, MIN_VALUE), c)
        m["output_tokens"].add(t, float(n), c)
        if r.gaps:
            gaps = [max(g, MIN_VALUE) for g in r.gaps]
            m["inter_chunk"].extend(t, gaps, c)
            per_event = max(1.0, n / (len(gaps) + 1))
            m["itl"].extend(t, [g / per_event for g in gaps], c, per_event)


def read(run: Run, lines: Iterable[RequestLine]) -> Columns:
    """A run's requests as columns, with each phase's spans of time (for goodput)."""
    start, end = _unix(run.start), _unix(run.end)
    cols = Columns(start, end, spans=spans(run, start, end))
    limits = {row.lang: {c.slo: c.threshold_ms for c in row.checks} for row in run.slo}
    for r in lines:
        cols.add(r, limits.get(r.lang, {}))
    return cols


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
