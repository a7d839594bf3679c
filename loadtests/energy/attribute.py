"""What the run's tokens cost: the GPUs' energy of each sampling interval shared out among the
(target, lang, api, phase)s by the output tokens each produced in it, GPU time likewise, and money
from the prices (`--price-per-gpu-hour`, `--price-per-kwh`); run.json's `cost` and `energy`.

The energy between two readings is taken as spread evenly over that interval (all one can know of a
counter read at two times), and the tokens of a tally tick evenly over the tick; the intervals that
straddle the run's start and end count whole. Intervals in which
no token was produced (idle, or a prefill alone) are no language's: `unattributed_j`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmchaos.run import Cost, Energy, EnergyBlock, usd
from loadtests.collector import TICKS_PER_S
from loadtests.energy.readings import Readings

Key = tuple[str, str, str, str]  # target, lang, api, phase
ROUND = 6
MAX_BLOCKS = 2000  # reading intervals a run keeps in run.json's blocks, at most (longer runs' are merged)


@dataclass(frozen=True)
class Prices:
    per_gpu_hour: float | None = None
    per_kwh: float | None = None

    def usd(self, gpu_s: float, joules: float) -> float | None:
        return usd(gpu_s, joules, self.per_gpu_hour, self.per_kwh)


def total_joules(readings: Readings, start: float, end: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The times at which any GPU was read over the run, and all GPUs' joules since the first of them;
    None when the GPUs' readings have no time in common. The intervals that straddle the run's start
    and end are kept whole, from each GPU's last reading before the start to its first after the end:
    a source that reads on its own clock (Prometheus's scrapes) has no reading at either, and cutting
    an interval would leave out part of the first or last tokens' energy, never theirs to lose."""
    series = [np.array(s, dtype=float) for s in readings.joules.values()]
    lo = max(float(s[max(0, int(np.searchsorted(s[:, 0], start, side="right")) - 1), 0]) for s in series)
    hi = min(float(s[min(len(s) - 1, int(np.searchsorted(s[:, 0], end, side="left"))), 0]) for s in series)
    if hi <= lo:
        return None
    times = np.unique(np.concatenate([[lo, hi], *(s[:, 0] for s in series)]))
    times = times[(times >= lo) & (times <= hi)]
    joules = sum(np.interp(times, s[:, 0], s[:, 1]) for s in series)
    return times, np.asarray(joules) - np.asarray(joules)[0]


def ticks_by_key(tally: Mapping[tuple[Any, ...], int]) -> dict[Key, Counter[int]]:
    """The tally (target, lang, api, phase, tick) -> tokens, by key."""
    ticks: dict[Key, Counter[int]] = defaultdict(Counter)
    for (target, lang, api, phase, tick), n in tally.items():
        ticks[(target, lang, api, phase)][int(tick)] += n
    return ticks


def tokens_by_key(tally: Mapping[tuple[Any, ...], int]) -> dict[Key, tuple[np.ndarray, np.ndarray]]:
    """Each key's cumulative output tokens as a function of time: (tick edges, tokens before each)."""
    out = {}
    for key, counts in ticks_by_key(tally).items():
        order = sorted(counts)
        edges = np.array([t for k in order for t in (k / TICKS_PER_S, (k + 1) / TICKS_PER_S)])
        cum = np.cumsum([0.0] + [c for k in order for c in (0.0, counts[k])])[1:]
        out[key] = (edges, cum)
    return out


def attribute(
    readings: Readings,
    tally: Mapping[tuple[Any, ...], int],
    produced: Counter[tuple[str, ...]],
    prices: Prices,
    start: float,
    end: float,
) -> tuple[list[Cost], Energy]:
    """run.json's `cost` rows (one per key that produced tokens) and `energy`."""
    ticks = ticks_by_key(tally)
    keys: list[Key] = sorted(set(ticks) | {(k[0], k[1], k[2], k[3]) for k in produced})
    span = total_joules(readings, start, end) if readings.joules else None
    if span is None:
        why = readings.why or "the GPUs' readings share no time within the run"
        rows = [absent(k, sum(ticks[k].values()) if k in ticks else 0, produced.get(k, 0), why) for k in keys]
        return rows, Energy(source="absent", origin=readings.origin, why=why)
    times, joules = span
    source = "modelled" if readings.modelled else "measured"
    gpus = len(readings.joules)
    cumulative = {k: np.interp(times, *c, left=0.0) for k, c in tokens_by_key(tally).items()}
    parts, unattributed = shares(times, joules, cumulative, gpus)
    sums: dict[Key, np.ndarray] = defaultdict(lambda: np.zeros(3))
    for (_, key), part in parts.items():
        sums[key] += part
    blocks = merged_blocks(parts, times)
    rows = [row(key, source, sums.get(key), produced.get(key, 0), prices) for key in keys]
    energy = Energy(
        source=source,
        origin=readings.origin,
        why=readings.why,
        gpus=tuple(sorted(readings.joules)),
        method=readings.method,
        samples=readings.samples,
        interval_s=readings.interval_s,
        covered=(round(float(times[0]), 3), round(float(times[-1]), 3)),
        energy_j=round(float(joules[-1]), ROUND),
        unattributed_j=round(unattributed, ROUND),
        gpu_s=round(float(times[-1] - times[0]) * gpus, ROUND),
        price_per_gpu_hour=prices.per_gpu_hour,
        price_per_kwh=prices.per_kwh,
        blocks=blocks,
    )
    return rows, energy


def shares(
    times: np.ndarray, joules: np.ndarray, cumulative: dict[Key, np.ndarray], gpus: int
) -> tuple[dict[tuple[int, Key], np.ndarray], float]:
    """Each reading interval's (joules, GPU-seconds, tokens) of each key that produced tokens in it, in
    proportion to them; and the joules of the intervals in which none was produced."""
    parts: dict[tuple[int, Key], np.ndarray] = {}
    unattributed = 0.0
    for i in range(len(times) - 1):
        de, seconds = joules[i + 1] - joules[i], (times[i + 1] - times[i]) * gpus
        made = {k: float(c[i + 1] - c[i]) for k, c in cumulative.items() if c[i + 1] > c[i]}
        total = sum(made.values())
        if not total:
            unattributed += de
        for key, n in made.items():
            parts[(i, key)] = np.array([de * n / total, seconds * n / total, n])
    return parts, unattributed


def merged_blocks(parts: dict[tuple[int, Key], np.ndarray], times: np.ndarray) -> list[EnergyBlock]:
    """run.json's blocks: each key's share of each reading interval, consecutive intervals merged so
    that a run has at most MAX_BLOCKS of them (a day read every second would not fit run.json;
    `compare` blocks them coarser still)."""
    n = len(times) - 1
    group = (lambda i: i * MAX_BLOCKS // n) if n > MAX_BLOCKS else (lambda i: i)
    merged: dict[tuple[int, Key], list[Any]] = {}
    for (i, key), part in parts.items():
        g = merged.setdefault((group(i), key), [times[i], times[i + 1], np.zeros(3)])
        g[0], g[1] = min(g[0], times[i]), max(g[1], times[i + 1])
        g[2] += part
    return [
        EnergyBlock(
            start=round(float(a), 3),
            end=round(float(b), 3),
            **names(key),
            energy_j=round(float(part[0]), ROUND),
            gpu_s=round(float(part[1]), ROUND),
            tokens=round(float(part[2]), ROUND),
        )
        for (_, key), (a, b, part) in sorted(merged.items(), key=lambda kv: (kv[1][0], kv[0][1]))
    ]


def names(key: Key) -> dict[str, str]:
    return dict(zip(("target", "lang", "api", "phase"), key, strict=True))


def row(key: Key, source: str, sums: np.ndarray | None, requests: int, prices: Prices) -> Cost:
    """One key's cost from its sums (None: none of its tokens fell within the readings)."""
    fields = names(key)
    if sums is None or not sums[2]:
        why = "none of its tokens were produced within the energy readings"
        return Cost(**fields, source=source, tokens=0.0, requests=requests, why=why)
    joules, gpu_s, tokens = (float(x) for x in sums)
    usd = prices.usd(gpu_s, joules)
    return Cost(
        **fields,
        source=source,
        tokens=round(tokens, ROUND),
        requests=requests,
        energy_j=round(joules, ROUND),
        gpu_s=round(gpu_s, ROUND),
        j_per_token=joules / tokens,
        j_per_request=joules / requests if requests else None,
        usd=usd,
        usd_per_mtok=usd / tokens * 1e6 if usd is not None else None,
    )


def absent(key: Key, tokens: int, requests: int, why: str) -> Cost:
    fields = names(key)
    return Cost(**fields, source="absent", tokens=tokens, requests=requests, why=why)
