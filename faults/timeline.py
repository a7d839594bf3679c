"""The fault timeline of a load test: the phase each request started in, as its process knows it.

A `Timeline` answers `phase(t)`, and `settled(t)`: whether that answer is final yet (a fault host's
window is labelled only once its host acknowledged it). Two implement it: `FaultSession`
(faults/session.py, a schedule run here and on fault hosts) and `ClusterPhases` (faults/k8s/phases.py,
a Chaos Mesh Workflow the cluster runs). The master starts its timeline; each worker follows it
from two messages, one wire form each: `FaultClock` at test start, `PhaseUpdate` as the fault hosts'
phases are decided. This module is the floor they stand on: it imports nothing of the project but
the core's run model.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from llmchaos.run import FaultHost, FaultWindow

Active = tuple[str, str, str, bool]  # (fault, kind, target, active now), for llmchaos_fault_active


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    labels: tuple[str, ...]


@dataclass(frozen=True)
class PhaseUpdate:
    """Fault hosts' phases newly decided on the master: segments [start, end, labels] and the time up
    to which every request's phase is settled."""

    segments: list[list[Any]]
    settled: float

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> PhaseUpdate:
        return cls(data["segments"], float(data["settled"]))


class Phases:
    """Decided labels of fault hosts' windows: segments in time order, settled up to `settled`."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.starts: list[float] = []
        self.settled = -math.inf

    def extend(self, segments: list[Segment], settled: float) -> None:
        for s in segments:
            self.segments.append(s)
            self.starts.append(s.start)
        self.settled = max(self.settled, settled)

    def labels(self, t: float) -> tuple[str, ...]:
        i = bisect_right(self.starts, t) - 1
        return self.segments[i].labels if i >= 0 and t < self.segments[i].end else ()

    def update(self, segments: list[Segment]) -> PhaseUpdate:
        """`segments` (newly decided) and how far this record is settled, for the workers."""
        return PhaseUpdate([[s.start, s.end, list(s.labels)] for s in segments], self.settled)

    def absorb(self, update: PhaseUpdate) -> None:
        segments = [Segment(float(a), float(b), tuple(labels)) for a, b, labels in update.segments]
        self.extend(segments, update.settled)


@dataclass(frozen=True)
class FaultClock:
    """The master's timeline as a worker follows it: what runs the faults (a schedule file, or a
    cluster Workflow `namespace/name`), the run's horizon, and the unix time it started."""

    t0: float
    schedule: str = ""
    workflow: str = ""
    horizon: float | None = None

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> FaultClock:
        horizon = data.get("horizon")
        return cls(
            float(data["t0"]), data.get("schedule") or "", data.get("workflow") or "", horizon and float(horizon)
        )


@runtime_checkable
class Timeline(Protocol):
    """A load test's fault phases: started on the master (or a single process), followed on workers."""

    def phase(self, unix_time: float) -> str:
        """The window(s) a request that started at `unix_time` ran in (joined by '+'), or baseline."""
        ...

    def settled(self, unix_time: float) -> bool:
        """Whether `phase(unix_time)` is final (a request started then can be labelled now)."""
        ...

    def start(self, t0: float) -> FaultClock:
        """Run the faults from unix time `t0`; the clock the workers follow."""
        ...

    def follow(self, clock: FaultClock) -> None:
        """A worker: the master's timeline started at `clock.t0` (a new test: nothing heard yet)."""
        ...

    def absorb(self, update: PhaseUpdate) -> None:
        """A worker: phases the master decided."""
        ...

    def stop(self) -> tuple[list[FaultWindow], list[FaultHost]]:
        """End whatever is active; the windows as they ran and the fault hosts, for run.json."""
        ...

    def close(self) -> None:
        """The test stopped, in this process: decide what is still undecided, as it stands."""
        ...

    def active(self) -> list[Active]:
        """Each fault and whether it is active now."""
        ...
