"""A fault schedule inside a Locust run: the master runs it; every process tags each request with
the fault window it started in (its phase), from the schedule and the master's start time."""

from __future__ import annotations

from faults.allow import Allowlist
from faults.journal import DEFAULT, Journal
from faults.runner import KINDS, Runner, prepare
from faults.schedule import Schedule, load

HORIZON_S = 24 * 3600.0


class FaultPhases:
    def __init__(self, path: str, journal: str, horizon: float | None, allow: Allowlist, runs_here: bool) -> None:
        self.schedule: Schedule = load(path, KINDS)
        self.horizon = horizon or HORIZON_S
        self.windows = self.schedule.windows(self.horizon)
        self.journal = Journal(journal or DEFAULT)
        self.t0: float | None = None
        self.allow = allow
        self.runner: Runner | None = None
        if runs_here:
            prepare(self.schedule, path, self.journal, allow)

    def phase(self, unix_time: float) -> str:
        """The window(s) a request that started at `unix_time` ran in, or baseline."""
        if self.t0 is None:
            return "baseline"
        rel = unix_time - self.t0
        names = sorted({w.name for w in self.windows if w.start <= rel < w.end})
        return "+".join(names) if names else "baseline"

    def start(self, t0: float) -> None:
        """Master (or single process): run the schedule from `t0`."""
        self.t0 = t0
        self.runner = Runner(self.schedule, self.journal, self.horizon, self.allow)
        self.runner.start(t0)

    def stop(self) -> list[dict]:
        """Revert whatever is active; the windows as they ran."""
        if self.runner is None:
            return []
        self.runner.stop(timeout=5.0)
        return self.runner.timeline_json()

    def active(self) -> list[tuple[str, str, str, bool]]:
        """(fault, kind, target, active) for llmchaos_fault_active."""
        running = {a.name for a in (self.runner.timeline if self.runner else [])
                   if a.actual_start is not None and a.actual_end is None}
        return [(f.name, f.kind, f.target_key, f.name in running) for f in self.schedule.faults]
