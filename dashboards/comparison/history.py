"""`regress --history DIR`: every gated statistic over a folder of nightly runs, with its change
points found by Apache Otava (E-divisive means with a Student's t significance test, as Hunter
does: window 50, p-value 0.001).

Each run is read through the core's run model (run.json and the histograms only); the runs are
ordered by their start, and a percentile is its exact value over every phase but warmup.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dashboards.comparison import cost
from dashboards.comparison.rules import ALL, Rules
from dashboards.comparison.sample import COSTS, PCTS
from dashboards.comparison.verdicts import METRICS
from llmchaos import run
from llmchaos.errors import UsageError
from llmchaos.histogram import Histogram

WINDOW = 50
MAX_PVALUE = 0.001


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first run after the change
    change: float  # mean after / mean before - 1
    p: float


@dataclass(frozen=True)
class Series:
    name: str
    unit: str
    values: list[float]
    change_points: list[ChangePoint]


@dataclass(frozen=True)
class History:
    runs: list[str]
    series: list[Series]

    def lines(self) -> list[str]:
        """One line per series with a change point."""
        return [
            f"history: {s.name}: change {cp.change:+.1%} at {self.runs[cp.index]} (p={cp.p:.2g})"
            for s in self.series
            for cp in s.change_points
        ]


def load(folder: Path, rules: Rules) -> History:
    if not folder.is_dir():
        raise UsageError("not a directory of runs", file=str(folder), field="--history")
    runs = sorted(
        (run.load(p) for p in folder.iterdir() if (p / "run.json").is_file()), key=lambda r: (r.run.start, r.run.run_id)
    )
    if not runs:
        raise UsageError("holds no run (no */run.json)", file=str(folder), field="--history")
    langs = sorted({k.lang for r in runs for k, _ in r.histograms})
    series = []
    for lang_rule, metric, stat in rules.gated():
        for lang in langs if lang_rule == ALL else [lang_rule]:
            values = [_value(r, lang, metric, stat) for r in runs]
            if any(v is None for v in values):
                continue
            vs = [float(v) for v in values if v is not None]
            unit = "ms" if METRICS[metric].unit == "s" else ""
            series.append(Series(f"{lang} {metric} {stat}", unit, vs, _change_points(vs)))
    return History([r.run.run_id for r in runs], series)


def _value(results: run.RunResults, lang: str, metric: str, stat: str) -> float | None:
    if metric == "error_rate":  # compare's definition: the end of the test cancelled nothing issued
        counted = results.run.issued_and_failed(lang)
        return counted[1] / counted[0] if counted and counted[0] else None
    if metric in COSTS:  # the run's own figure over its phases but warmup
        rows = [c for c in results.run.cost if c.lang == lang and c.phase != "warmup"]
        return getattr(cost.added(rows), metric) if rows else None
    if stat not in PCTS:
        return None
    merged = None
    for key, h in results.histograms:
        if key.lang == lang and key.metric == metric and key.phase != "warmup":
            merged = merged or Histogram(metric)
            merged.merge(h)
    return merged.quantile(PCTS[stat]) if merged is not None and merged.count else None


def _change_points(values: list[float]) -> list[ChangePoint]:
    if len(values) < 3:
        return []
    from otava.analysis import compute_change_points  # only with --history: it imports scipy.stats (1 s)

    points, _ = compute_change_points(values, window_len=min(WINDOW, len(values)), max_pvalue=MAX_PVALUE)
    return [ChangePoint(cp.index, float(cp.stats.forward_rel_change()), float(cp.stats.pvalue)) for cp in points]
