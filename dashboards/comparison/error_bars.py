"""Findings the generators' own error bars could flip: a TTFT or ITL change called worse or better
whose two sides' bars (run.json `validity.bounds`, per phase: llmchaos/bounds.py) overlap, so the
truths could lie the other way round or level.

A side of several runs pools their samples, and a pooled percentile lies between its runs' own:
the side's bar runs from the least of its runs' lows to the most of their highs. A side whose runs
carry no bar for the finding (written before bars were kept, or a replay) says nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from dashboards.comparison.verdicts import BETTER, WORSE, Comparison, Finding
from llmchaos.run import Bound

PCT = {"p50": 50.0, "p99": 99.0}  # the statistics each phase's bar is kept at


def flippable(
    result: Comparison, a_runs: Iterable[tuple[Bound, ...]], b_runs: Iterable[tuple[Bound, ...]]
) -> list[str]:
    """One line per worse or better TTFT/ITL finding at p50 or p99 the error bars could flip."""
    a, b = _bars(a_runs), _bars(b_runs)
    lines = []
    for r in result.rows:
        key = (r.lang, r.metric, r.phase, PCT.get(r.stat))
        if r.verdict not in (WORSE, BETTER) or key not in a or key not in b:
            continue
        (a_low, a_high), (b_low, b_high) = a[key], b[key]
        if a_low <= b_high and b_low <= a_high and (a_low < a_high or b_low < b_high):
            lines.append(_line(r, a[key], b[key]))
    return lines


def _bars(runs: Iterable[tuple[Bound, ...]]) -> dict[tuple[str, str, str, float | None], tuple[float, float]]:
    out: dict[tuple[str, str, str, float | None], tuple[float, float]] = {}
    for bounds in runs:
        for x in bounds:
            if x.phase is None:
                continue
            key = (x.lang, x.metric, x.phase, x.percentile)
            low, high = out.get(key, (x.low_ms, x.high_ms))
            out[key] = (min(low, x.low_ms), max(high, x.high_ms))
    return out


def _line(r: Finding, a: tuple[float, float], b: tuple[float, float]) -> str:
    return (
        f"{r.name} called {r.verdict}: the generators' error bars overlap (A {a[0]:.1f} to {a[1]:.1f} ms, "
        f"B {b[0]:.1f} to {b[1]:.1f} ms): the change could be theirs"
    )
