"""Each GPU's energy as cumulative joules at the times it was read, from an energy counter or from
power samples; and what every source of them offers. Where no GPU answers, the readings are absent
with the reason, never zero."""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field

ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since boot, a counter (dcgm-exporter's default-counters.csv)
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W, a gauge: integrated where a GPU has no energy counter
MODELLED = "llmchaos_power_model"  # a label only the reference server's modelled series carry
TIMEOUT_S = 5.0  # a read of a page or of Prometheus

Series = dict[str, list[tuple[float, float]]]  # GPU -> (unix time, value), in time order


@dataclass
class Readings:
    """Each GPU's cumulative joules at the times read; `why` says what is missing (all of it: absent)."""

    origin: str
    joules: Series = field(default_factory=dict)
    modelled: bool = False
    method: str | None = None  # counter | power
    why: str | None = None

    @property
    def samples(self) -> int:
        return sum(len(s) for s in self.joules.values())

    @property
    def interval_s(self) -> float | None:
        gaps = [b[0] - a[0] for s in self.joules.values() for a, b in itertools.pairwise(s)]
        return statistics.median(gaps) if gaps else None


def gpu_key(labels: dict[str, str]) -> str:
    """The GPU a series is of: its UUID where it has one (with the instance that exported it)."""
    if "UUID" in labels:
        return labels["UUID"] + (f"@{labels['instance']}" if "instance" in labels else "")
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")


def cumulative(counter_mj: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A counter's samples (mJ) as joules since the first, a drop read as a reset to zero (Prometheus's
    `increase` does the same)."""
    out, total = [], 0.0
    for i, (t, v) in enumerate(counter_mj):
        if i:
            before = counter_mj[i - 1][1]
            total += (v - before if v >= before else v) / 1000.0
        out.append((t, total))
    return out


def integrated(power_w: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Power samples (W) as joules since the first, by the trapezoid rule."""
    out, total = [], 0.0
    for i, (t, w) in enumerate(power_w):
        if i:
            t0, w0 = power_w[i - 1]
            total += (t - t0) * (w + w0) / 2
        out.append((t, total))
    return out


def figure(value: float) -> bool:
    """Whether a sample is one a counter or a power gauge can read (NaN, an infinity, below zero: not)."""
    return math.isfinite(value) and value >= 0


def readings(origin: str, counters: Series, powers: Series, modelled: bool, why: str) -> Readings:
    """Readings from the energy counters, or from the power samples of GPUs that have none; absent
    (with `why`) where no GPU has two samples of either."""
    if any(counters.values()) or any(powers.values()):
        why = "no GPU was read twice over the run (a run shorter than the sampling interval?)"
    joules: Series = {g: cumulative(s) for g, s in counters.items() if len(s) >= 2}
    method = "counter" if joules else None
    if not joules:
        joules = {g: integrated(s) for g, s in powers.items() if len(s) >= 2}
        method = "power" if joules else None
    if not joules:
        return Readings(origin, why=why)
    return Readings(origin, joules, modelled, method)


class Source:
    """Where the energy comes from: `sample` is called at the interval and at every phase edge (where
    it is `live`: it reads when asked), and `readings` once at the end."""

    origin: str
    live = False

    def attach(self, timeline: object) -> None:
        """The run's fault timeline, where a source needs it (a fault host's counters are kept there)."""

    def fresh(self) -> Source:
        """This source for a new test (a master runs one after another from its web UI)."""
        return self

    def sample(self) -> None:
        """Take a sample now (a page read here; Prometheus keeps its own)."""

    def readings(self, start: float, end: float) -> Readings:
        raise NotImplementedError
