"""A fault host's NVML counters, which it reads with each of its acknowledgements (faults/host/meter.py)
and the master keeps in its ledger."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from llmchaos.errors import UsageError
from loadtests.energy.readings import Readings, Series, Source, readings
from loadtests.energy.selector import Matcher


@runtime_checkable
class HostCounters(Protocol):
    """Where a fault host's counters are kept on the master (faults/session.py's FaultSession)."""

    remote: list[str]  # the fault hosts its schedule names

    def energy(self, host: str) -> tuple[Series, str | None]: ...


class FaultHost(Source):
    """A fault host's NVML counters, read with each of its acknowledgements (every second and right
    after each window's apply and revert) and put on the master's clock; the selector matches its
    GPUs' `UUID` and `Hostname` (the host's name)."""

    def __init__(self, name: str, matchers: list[Matcher]) -> None:
        self.name, self.matchers, self.origin = name, matchers, f"fault host {name} (NVML)"
        self.counters: HostCounters | None = None

    def attach(self, timeline: object) -> None:
        """The run's fault session, which must know this host (else a UsageError naming the flag)."""
        if not isinstance(timeline, HostCounters) or self.name not in timeline.remote:
            raise UsageError(f"no fault host {self.name!r} in --schedule", field="--energy-from")
        self.counters = timeline

    def readings(self, start: float, end: float) -> Readings:
        if self.counters is None:
            return Readings(self.origin, why="not attached to the run's fault hosts")
        series, why = self.counters.energy(self.name)
        chosen = {g: s for g, s in series.items() if all(m({"UUID": g, "Hostname": self.name}) for m in self.matchers)}
        got = readings(self.origin, chosen, {}, False, f"no GPU energy from fault host {self.name}: {why}")
        if got.why is None:
            got.why = why
        return got
