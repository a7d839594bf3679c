"""The generator's error bar: how far its own lateness can have moved a percentile.

Events are timed by the kernel's receive stamp, so a read the generator takes late costs nothing,
unless it brought several events: they all carry the stamp of its last bytes. The data plane bounds
how much earlier its first bytes can have come (its `late`, from when the socket last stood empty
and when the epoll pass that found it readable woke: `_native.c`, timed_wait), so each sample
around such a read is known within an error: TTFT up to that much less, an ITL sample that much
either way (`RequestRecord.late_errors`). The collector counts each such sample three times, by
the histogram's counter it falls in: as measured, at its least and at its most.

Every sample's true value lies between its least and its most (the others are as measured), so the
true p-th percentile lies between the measured histogram's with the uncertain samples moved to their
least, and the same with them moved to their most: order statistics keep their order. TTFT is never
less than measured, so its bound ends at its measure. The histograms' own resolution (0.1 %) holds.

The bound is material, and the run INVALID, when it could flip an SLO verdict (the threshold lies
within it), or at p50 or p99 is wider than MATERIAL_SHARE of the figure and MATERIAL_FLOOR_MS;
otherwise the report shows it beside the figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import numpy as np

from llmchaos import slo
from llmchaos.histogram import Histogram, HistogramSet
from llmchaos.run import Bound, SloResult

METRICS = ("ttft", "itl")  # the metrics the generator's late reads can move
SHOWN = (50.0, 99.0)  # percentiles bounded for every (target, lang, api), besides those its SLOs name
MATERIAL_SHARE = 0.10  # a bound wider than this share of its figure (at p50 or p99) is material ...
MATERIAL_FLOOR_MS = 0.5  # ... and than this (a figure near nothing, events the network delivered together)
AS = ("measured", "least", "most")  # an uncertain sample, counted as each


def late_keys(metric: str, measured: float, less: float, more: float) -> list[str]:
    """The collector's count keys of a `metric` sample `measured`, whose truth can be up to `less`
    seconds under it and `more` over: as measured, at its least and at its most, each by the
    histogram's counter it falls in."""
    h = _layout(metric)
    values = (measured, max(0.0, measured - less), measured + more)
    return [f"late:{metric}:{a}:{h.index(v)}" for a, v in zip(AS, values, strict=True)]


@cache
def _layout(metric: str) -> Histogram:
    return Histogram(metric)


def evaluate(hist: HistogramSet, counts: Mapping[tuple[str, ...], int], slo_rows: list[SloResult]) -> list[Bound]:
    """Per (target, lang, api) of the SLO rows and metric: the bound at p50, p99 and each percentile
    its SLOs name, over every phase as the SLO checks are (`phase` None), then at p50 and p99 in each
    phase (what a comparison's findings are); `counts` holds the uncertain samples by counter (keyed
    (target, lang, api, phase, late:<metric>:<as>:<counter>), as the collector's)."""
    late: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for k, n in counts.items():
        _, metric, as_, index = k[4].split(":")
        late.setdefault((*k[:4], metric, as_), []).append((int(index), n))
    out = []
    for row in slo_rows:
        sel = {"target": row.target, "lang": row.lang, "api": row.api}
        named = [c.slo for c in row.checks]
        phases = sorted({k.phase for k, _ in hist.select(**sel)})
        for metric in METRICS:
            pcts = sorted(set(SHOWN) | {pct for m, pct in map(slo.parts, named) if m == metric})
            out += _bounds(hist, late, sel, metric, None, phases, pcts)
            for phase in phases:
                out += _bounds(hist, late, sel, metric, phase, [phase], list(SHOWN))
    return out


def _bounds(
    hist: HistogramSet,
    late: Mapping[tuple[str, ...], list[tuple[int, int]]],
    sel: dict[str, str],
    metric: str,
    phase: str | None,
    phases: list[str],
    pcts: list[float],
) -> list[Bound]:
    """The bounds of one histogram (`phase`; None: all `phases`) at `pcts`."""
    h = hist.combined(metric, **sel) if phase is None else hist.combined(metric, **sel, phase=phase)
    if h is None or not h.count:
        return []
    size = h.hdr.counts_len
    measured = np.frombuffer(h.hdr.counts, dtype=np.uint64, count=size).astype(np.int64)
    running = least = most = np.cumsum(measured)
    moved = {a: np.zeros(size, dtype=np.int64) for a in AS}
    for a, into in moved.items():
        for one in phases:
            for index, n in late.get((sel["target"], sel["lang"], sel["api"], one, metric, a), []):
                into[index] += n
    if moved["measured"].any():  # else every sample is as measured: the bound is the figure
        certain = measured - moved["measured"]
        least, most = np.cumsum(certain + moved["least"]), np.cumsum(certain + moved["most"])
    uncertain = min(1.0, int(moved["measured"].sum()) / h.count)
    out = []
    for p in pcts:
        value, low, high = (h.at_rank(r, p) * 1000 for r in (running, least, most))
        out.append(
            Bound(
                **sel,
                phase=phase,
                metric=metric,
                percentile=p,
                value_ms=value,
                low_ms=min(low, value),
                high_ms=max(high, value),
                uncertain=uncertain,
            )
        )
    return out


def material(bounds: list[Bound], slo_rows: list[SloResult]) -> list[str]:
    """One line per bound that matters: one whose SLO verdict it could flip, or at p50/p99 wider than
    MATERIAL_SHARE of its figure and MATERIAL_FLOOR_MS."""
    thresholds = {
        (row.target, row.lang, row.api, *slo.parts(c.slo)): (c.slo, c.threshold_ms)
        for row in slo_rows
        for c in row.checks
    }
    lines = []
    for b in (b for b in bounds if b.phase is None):
        key, threshold = thresholds.get((b.target, b.lang, b.api, b.metric, b.percentile), ("", None))
        width = b.high_ms - b.low_ms
        if threshold is not None and b.low_ms <= threshold < b.high_ms:
            lines.append(f"{b.lang} {key} {b.value_ms:.1f} ms could be {_range(b)}: its SLO ({threshold:g}) could flip")
        elif b.percentile in SHOWN and width > max(MATERIAL_SHARE * b.value_ms, MATERIAL_FLOOR_MS):
            lines.append(
                f"{b.lang} {b.metric} p{b.percentile:g} {b.value_ms:.1f} ms could be {_range(b)}, over "
                f"{MATERIAL_SHARE:.0%} of it"
            )
    return lines


def _range(b: Bound) -> str:
    share = f"{b.uncertain:.1%} of its samples read with bytes that came after them"
    return f"{b.low_ms:.1f} to {b.high_ms:.1f} ms ({share})"
