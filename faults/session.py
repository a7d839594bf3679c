"""One run of a fault schedule, the same for `llmchaos faults run` and for Locust's `--schedule`:
load and validate it, sweep leftovers and probe every target, run it from a start time, stop
(reverting whatever is active), and give back the windows as they ran."""

from __future__ import annotations

from faults.allow import Allowlist
from faults.injectors import KINDS
from faults.journal import DEFAULT, Journal
from faults.runner import Runner, prepare
from faults.schedule import HORIZON_S, Schedule, load
from llmchaos.run import FaultWindow


class FaultSession:
    """`prepare=False` for a process that only tags requests with phases (a Locust worker): it
    reads the schedule and never touches the journal or a target."""

    def __init__(
        self,
        path: str,
        journal: str | None = None,
        horizon: float | None = None,
        allow: Allowlist = Allowlist(),
        prepare_targets: bool = True,
    ) -> None:
        self.path = path
        self.schedule: Schedule = load(path, KINDS)
        self.horizon = horizon or HORIZON_S
        self.journal = Journal(journal or DEFAULT)
        self.allow = allow
        self.t0: float | None = None  # unix time the schedule started (as this process heard it)
        self.runner: Runner | None = None
        if prepare_targets:
            prepare(self.schedule, path, self.journal, allow)

    def phase(self, unix_time: float) -> str:
        """The window(s) a request that started at `unix_time` ran in (joined by '+'), or baseline."""
        if self.t0 is None:
            return "baseline"
        return "+".join(self.schedule.active(unix_time - self.t0, self.horizon)) or "baseline"

    def start(self, t0: float) -> float:
        """Run the schedule from unix time `t0` (in threads; returns at once)."""
        self.t0 = t0
        self.runner = Runner(self.schedule, self.journal, self.horizon, self.allow)
        return self.runner.start(t0)

    def stop(self, timeout: float = 5.0) -> list[FaultWindow]:
        """Revert whatever is active (within `timeout`); the windows as they ran."""
        if self.runner is None:
            return []
        self.runner.stop(timeout=timeout)
        return self.runner.windows()

    def errors(self) -> list[str]:
        """One line per window that failed to apply or to revert."""
        timeline = self.runner.timeline if self.runner else []
        return [f"{a.name}: {a.error}" for a in timeline if a.error]

    def active(self) -> list[tuple[str, str, str, bool]]:
        """(fault, kind, target, active) for each fault of the schedule, for llmchaos_fault_active."""
        running = {
            a.name
            for a in (self.runner.timeline if self.runner else [])
            if a.actual_start is not None and a.actual_end is None
        }
        return [(f.name, f.kind, f.target_key, f.name in running) for f in self.schedule.faults]
