"""How figures read in every format: values in their units, changes, intervals, the headline."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dashboards.comparison.bootstrap import CORRECTION_NAMES
from dashboards.comparison.verdicts import INCONCLUSIVE, METRICS, Comparison, Finding

MDE_SHOWN = 10.0  # a minimum detectable effect beyond +1000 % says only that the data cannot tell


def value(v: float | None, unit: str) -> str:
    """A figure in its unit: latencies in ms (or s), ratios in %, rates per second, joules, dollars."""
    if v is None or not math.isfinite(v):
        return "-"
    if unit == "s":
        return duration(v)
    if unit == "ratio":
        return f"{v * 100:.3g} %"
    if unit == "req/s":
        return f"{v:.3g}/s"
    if unit in ("J/token", "J"):
        return f"{v:.3g} J"
    if unit == "$/Mtok":
        return f"${v:.3g}"
    return f"{v:.3g}"


def duration(v: float) -> str:
    """Seconds in the unit that reads best, to 3 significant figures and never in exponents:
    4.2 µs, 730 ms, 1.03 s, 4210 s (a value that rounds up to 1000 of a unit reads in the next)."""
    a = abs(v)
    if a == 0:
        return "0 s"
    if a >= 999.5:
        return f"{v:.0f} s"
    scale, unit = (1.0, "s") if a >= 0.9995 else (1e3, "ms") if a >= 0.9995e-3 else (1e6, "µs")
    return f"{v * scale:.3g} {unit}"


def change(r: Finding) -> str:
    """The change B - A: relative where it has one, else absolute."""
    if r.rel is not None:
        return f"{r.rel * 100:+.1f} %"
    if r.abs is not None:
        return signed(r.abs, r.unit)
    return "-"


def signed(v: float, unit: str) -> str:
    return ("+" if v >= 0 else "-") + value(abs(v), unit)


def interval(r: Finding) -> str:
    if r.rel_ci is not None:
        lo, hi = r.rel_ci
        return f"[{lo * 100:+.1f}, {hi * 100:+.1f}] %"
    if r.abs_ci is not None:
        return f"[{signed(r.abs_ci[0], r.unit)}, {signed(r.abs_ci[1], r.unit)}]"
    return "-"


def detectable(r: Finding) -> str:
    """The minimum detectable effect: relative where it has one."""
    if r.mde_rel is not None:
        return f"{r.mde_rel * 100:.1f} %" if r.mde_rel <= MDE_SHOWN else f">{MDE_SHOWN:.0%}"
    return value(r.mde_abs, r.unit) if r.mde_abs is not None else "-"


def p_value(p: float | None) -> str:
    return "-" if p is None else (f"{p:.2g}" if p >= 1e-4 else "<1e-4")


def metric(r: Finding) -> str:
    return METRICS[r.metric].label


NUMBERS = ("A", "B", "change", "interval", "p adj", "MDE")


def aligned(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A table as text lines, the head first: each column padded to its widest cell, the last running on."""
    widths = [max(len(row[i]) for row in (head, *rows)) for i in range(len(head) - 1)] + [0]
    return ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in (head, *rows)]


def numbers(r: Finding) -> tuple[str, ...]:
    """A row's `NUMBERS`, as every format shows them."""
    return (
        value(r.a, r.unit),
        value(r.b, r.unit),
        change(r),
        interval(r),
        p_value(r.p_adj),
        detectable(r),
    )


def cell(r: Finding) -> str:
    """e.g. `de TTFT p99 (baseline)`."""
    return f"{r.lang} {metric(r)} {r.stat if r.stat != 'rate' else ''}".rstrip() + f" ({r.phase})"


def headline(c: Comparison) -> str:
    """One sentence a person reads first: the verdict and, when worse, which cells."""
    worse = c.worse
    if worse:
        names = ", ".join(f"{cell(r)} {change(r)}" for r in worse[:5]) + (" ..." if len(worse) > 5 else "")
        return f"WORSE: B is worse than A in {len(worse)} cell{'s' * (len(worse) != 1)}: {names}"
    counts = c.counts()
    gated = [r for r in c.rows if r.gated]
    if gated and all(r.verdict == INCONCLUSIVE for r in gated):
        return "NO VERDICT: not enough data in any cell to tell a change of the minimum size"
    return (
        f"NO WORSE: no cell of B is worse than A ({counts['better']} better, {counts['no change']} no change, "
        f"{counts[INCONCLUSIVE]} inconclusive)"
    )


def method(c: Comparison) -> str:
    """How the verdicts were reached, in one sentence."""
    s = c.settings
    own = any(r.rule != s.rule(r.metric) for r in c.rows if r.gated)
    needs = (
        "more than its rule allows (per language and metric: the rules file or the registry's SLOs)"
        if own
        else f"at least {s.min_effect:.0%} and {s.min_abs * 1000:g} ms (latencies)"
    )
    return (
        f"{CORRECTION_NAMES[s.correction]} at {s.alpha:g} over the gated cells; a verdict needs a change of "
        f"{needs}; intervals {1 - s.alpha:.0%}; minimum "
        f"detectable effects at {s.power:.0%} power; block bootstrap ({s.resamples} resamples) within a run, "
        "runs as units when both sides have repetitions"
    )
