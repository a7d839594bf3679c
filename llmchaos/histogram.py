"""Exact, mergeable high-resolution histograms keyed by (target, lang, api, phase, metric).

HDR histograms with 3 significant digits (relative error <= 0.1 %), plus an exact
sum; merging two sets adds counts bucket by bucket, so a master's merge of its
workers' histograms equals one histogram of all their values.
"""

from __future__ import annotations

import base64
import math
import zlib
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import NamedTuple

import numpy as np
from hdrh.codec import HdrHistogramEncoder
from hdrh.histogram import HdrHistogram

from llmchaos.metrics import METRICS

HIGHEST = 3_600_000_000  # one hour in microseconds
DIGITS = 3
MAX_PAYLOAD = 2**20  # decompressed bytes of one encoded histogram: ours take at most ~0.2 MB
SUM_SLACK = 1e-9  # relative: a sum's float rounding against its counts' bounds
QUANTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


def nearest_rank(values: Sequence[float], pct: float) -> float:
    """The percentile of raw values as HDR histograms define it: the value at rank round(pct% of n),
    at least 1 (for checking a histogram against the values it recorded)."""
    s = sorted(values)
    return s[max(1, int(pct / 100 * len(s) + 0.5)) - 1]


class Key(NamedTuple):
    target: str
    lang: str
    api: str
    phase: str
    metric: str


class Histogram:
    __slots__ = ("hdr", "scale", "sum")

    def __init__(self, metric: str) -> None:
        self.scale = METRICS[metric].scale
        self.hdr = HdrHistogram(1, HIGHEST, DIGITS)
        self.sum = 0.0

    def record(self, value: float) -> None:
        """Record a value in the metric's unit (seconds or tokens); sub-unit values count as 1."""
        self.record_many((value,))

    def record_many(self, values: Iterable[float], times: Iterable[int] | None = None) -> None:
        """Record values (each `times` over, else once); hdrh's own record_value costs ~4.5 us each,
        this index arithmetic (the same as hdrh's, with int.bit_length) ~0.6 us, which matters when
        a request ends with 1,000 ITLs."""
        h, scale = self.hdr, self.scale
        counts, mask, unit = h.counts, h.sub_bucket_mask, h.unit_magnitude
        half_mag, half = h.sub_bucket_half_count_magnitude, h.sub_bucket_half_count
        lo, hi, n, total = h.min_value, h.max_value, 0, 0.0
        for value, k in zip(values, repeat(1) if times is None else times, strict=False):  # repeat is endless
            v = min(max(1, round(value * scale)), HIGHEST)
            bucket = (v | mask).bit_length() - unit - half_mag - 1
            counts[((bucket + 1) << half_mag) + (v >> (bucket + unit)) - half] += k
            lo, hi = (v if v < lo else lo), (v if v > hi else hi)
            n += k
            total += value * k
        h.total_count += n
        h.min_value, h.max_value = lo, hi
        self.sum += total

    def index(self, value: float) -> int:
        """The counter `record` adds `value` to."""
        return int(self.hdr._counts_index_for(min(max(1, round(value * self.scale)), HIGHEST)))

    @property
    def count(self) -> int:
        return self.hdr.get_total_count()

    def quantile(self, pct: float) -> float:
        """hdrh's get_value_at_percentile (the value at rank round(pct % of n), at least 1), from a
        prefix sum of the counts rather than hdrh's walk of them in Python (25x faster)."""
        h = self.hdr
        return self.at_rank(np.cumsum(np.frombuffer(h.counts, dtype=np.uint64, count=h.counts_len)), pct)

    def at_rank(self, running: np.ndarray, pct: float) -> float:
        """The percentile `pct` of counts in this histogram's layout, given their prefix sum."""
        total = int(running[-1]) if len(running) else 0
        if not total:
            return 0.0
        rank = max(int(((min(pct, 100.0) * total) / 100) + 0.5), 1)
        idx = int(np.searchsorted(running, rank))
        return self.hdr.get_highest_equivalent_value(self.hdr.get_value_from_index(idx)) / self.scale

    def cumulative(self, bounds: Iterable[float]) -> list[int]:
        """Counts of values <= each bound (for Prometheus buckets), from a prefix sum of the counts
        (a scrape must not walk 23,552 counters per histogram in Python)."""
        h = self.hdr
        running = np.cumsum(np.frombuffer(h.counts, dtype=np.uint64, count=h.counts_len))
        out = []
        for bound in bounds:
            v = min(int(bound * self.scale), HIGHEST)
            out.append(int(running[h._counts_index_for(v)]) if v >= 1 else 0)
        return out

    def summary(self) -> dict[str, float]:
        if not self.count:
            return {"count": 0}
        s = {"count": self.count, "mean": self.sum / self.count}
        s.update({name: self.quantile(p) for name, p in QUANTILES.items()})
        s["max"] = self.hdr.get_max_value() / self.scale
        return s

    def merge(self, other: Histogram) -> None:
        self.hdr.add(other.hdr)
        self.sum += other.sum

    def encode(self) -> dict:
        return {"hdr": self.hdr.encode().decode("ascii"), "sum": self.sum}

    @classmethod
    def decode(cls, metric: str, data: dict) -> Histogram:
        """One of ours from `encode`'s dict; ValueError for another layout, a payload that decompresses
        past MAX_PAYLOAD, or a sum its counts cannot have."""
        h = cls(metric)
        h.hdr = _ours(data["hdr"])
        total = data["sum"]
        if isinstance(total, bool) or not isinstance(total, (int, float)):
            raise ValueError(f"sum: not a number: {total!r}")
        h.sum = float(total)
        h._check_sum()
        return h

    def _check_sum(self) -> None:
        """The sum lies where the recorded values can put it: every value rounds to its bucket, so
        it is at least the lowest bucket's floor (unless a value was below one unit) and at most the
        highest's ceiling (unless one was clamped at HIGHEST), per value."""
        n, total, hdr = self.count, self.sum, self.hdr
        if not math.isfinite(total) or total < 0:
            raise ValueError(f"sum: must be a finite number >= 0, got {total!r}")
        if not n:
            if total:
                raise ValueError(f"sum: {total!r} with no value counted")
            return
        lo, hi = hdr.get_min_value(), hdr.get_max_value()
        least = (hdr.get_lowest_equivalent_value(lo) - 0.5) / self.scale * n if lo > 1 else 0.0
        most = (hdr.get_highest_equivalent_value(hi) + 0.5) / self.scale * n if hi < HIGHEST else math.inf
        if not least * (1 - SUM_SLACK) <= total <= most * (1 + SUM_SLACK):
            raise ValueError(f"sum: {total!r} is not the sum of its {n} values ({least:.6g} to {most:.6g})")


def _ours(text: object) -> HdrHistogram:
    """An HDR histogram of our layout (1 to HIGHEST, DIGITS digits) from its base64 V2 encoding, its
    payload's size checked before it is inflated and its layout before its counts are allocated."""
    if not isinstance(text, str):
        raise ValueError(f"hdr: not a string: {type(text).__name__}")
    raw = base64.b64decode(text, validate=True)
    inflate = zlib.decompressobj()
    if len(inflate.decompress(raw[8:], MAX_PAYLOAD)) >= MAX_PAYLOAD:
        raise ValueError(f"hdr: a payload of more than {MAX_PAYLOAD} bytes")
    payload = HdrHistogramEncoder.decode(text.encode("ascii"))
    head = payload.payload
    layout = (head.lowest_trackable_value, head.highest_trackable_value, head.significant_figures)
    if layout != (1, HIGHEST, DIGITS):
        raise ValueError(f"hdr: another layout (lowest, highest, digits) {layout}, ours is {(1, HIGHEST, DIGITS)}")
    return HdrHistogram(1, HIGHEST, DIGITS, hdr_payload=payload)


class HistogramSet:
    """Histograms by key; `drain` hands over what was recorded since the last drain."""

    def __init__(self) -> None:
        self._h: dict[Key, Histogram] = {}

    def record(self, key: Key, value: float) -> None:
        self.record_many(key, (value,))

    def record_many(self, key: Key, values: Iterable[float], times: Iterable[int] | None = None) -> None:
        h = self._h.get(key)
        if h is None:
            h = self._h[key] = Histogram(key.metric)
        h.record_many(values, times)

    def get(self, key: Key) -> Histogram | None:
        return self._h.get(key)

    def __iter__(self) -> Iterator[tuple[Key, Histogram]]:
        return iter(list(self._h.items()))

    def __len__(self) -> int:
        return len(self._h)

    def merge(self, other: HistogramSet) -> None:
        for key, h in other:
            mine = self._h.get(key)
            if mine is None:
                self._h[key] = h
            else:
                mine.merge(h)

    def encode(self) -> list[dict]:
        return [{**key._asdict(), **h.encode()} for key, h in self]

    @classmethod
    def decode(cls, items: list[dict]) -> HistogramSet:
        """`encode`'s list read back: KeyError for a missing field, ValueError for a bad one."""
        out = cls()
        for item in items:
            key = Key(*(item[f] for f in Key._fields))
            if not all(isinstance(part, str) for part in key):
                raise ValueError(f"the key's fields must be strings, got {list(key)!r}")
            if key.metric not in METRICS:
                raise ValueError(f"unknown metric {key.metric!r}")
            out._h[key] = Histogram.decode(key.metric, item)
        return out

    def select(self, **match: str) -> HistogramSet:
        """The histograms whose key fields equal `match` (shared, not copied), e.g. one target's."""
        out = HistogramSet()
        out._h = {k: h for k, h in self._h.items() if all(getattr(k, f) == v for f, v in match.items())}
        return out

    def combined(self, metric: str, **match: str) -> Histogram | None:
        """A new histogram of every key of `metric` whose fields equal `match` (e.g. all phases)."""
        out = None
        for key, h in self:
            if key.metric == metric and all(getattr(key, f) == v for f, v in match.items()):
                if out is None:
                    out = Histogram(metric)
                out.merge(h)
        return out

    def drain(self) -> HistogramSet:
        out = HistogramSet()
        out._h, self._h = self._h, {}
        return out
