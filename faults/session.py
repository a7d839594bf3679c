"""One run of a fault schedule, the same for `llmchaos faults run` and for Locust's `--schedule`:
load and validate it, sweep leftovers and probe every target, run it from a start time, stop
(reverting whatever is active), and give back the windows as they ran.

Windows whose target names a fault host (`target.host`) are not run here: a Locust master leases
them to their hosts (faults/host/master.py) and keeps their record in `ledger`; their phases are
what the hosts acknowledged (`phases`, decided on the master, sent to its workers)."""

from __future__ import annotations

import json
import logging
import os
import time

from faults.allow import Allowlist
from faults.host.ledger import UNCONFIRMED, Ledger, Phases
from faults.injectors import KINDS
from faults.injectors.base import FieldError
from faults.journal import DEFAULT, LEFT, Journal
from faults.recover import recover
from faults.runner import Runner
from faults.schedule import HORIZON_S, Schedule, load
from llmchaos.errors import UsageError
from llmchaos.run import FaultWindow

log = logging.getLogger("llmchaos.faults")


LEASE_S = 3.0  # a fault host keeps a window this long without hearing from the master


def prepare(schedule: Schedule, path: str, journal: Journal, allow: Allowlist) -> None:
    """Before a run: refuse a journal that cannot be written (nothing could be reverted after a
    kill), sweep what a killed run left, then check every target of this process (not a fault
    host's) can take its fault (UsageError naming the schedule's line otherwise), so nothing is
    applied if one cannot."""
    schedule = schedule.on(None)
    journal.check_writable()
    for line in recover(journal, skip_live=True):
        log.warning("swept a leftover fault: %s", line)
    for (kind, _), specs in schedule.by_target().items():
        injector = KINDS[kind](specs[0].target, allow)
        probed: set[str] = set()
        for spec in specs:  # each target once per set of params
            params = spec.applied_params
            if json.dumps(params, sort_keys=True) in probed:
                continue
            probed.add(json.dumps(params, sort_keys=True))
            try:
                reason = injector.probe(params)
            except FieldError as e:
                at = spec.lines.get(e.field.split(".")[0], spec.params_line)
                raise UsageError(str(e), file=path, line=at, field=f"faults[{spec.index}].{e.field}") from None
            if reason:
                raise UsageError(
                    f"cannot inject {kind}: {reason}",
                    file=path,
                    line=spec.target_line,
                    field=f"faults[{spec.index}].target",
                )


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
        lease_s: float = LEASE_S,
    ) -> None:
        self.path = path
        self.schedule: Schedule = load(path, KINDS)
        self.local, self.hosts = self.schedule.on(None), self.schedule.hosts()
        self.horizon = horizon or HORIZON_S
        self.journal = Journal(journal or DEFAULT)
        self.allow = allow
        self.t0: float | None = None  # unix time the schedule started (as this process heard it)
        self.runner: Runner | None = None
        # the master's record of the fault hosts' windows (decided there; a worker hears `phases`)
        self.ledger = Ledger(self.schedule, self.horizon, lease_s, lease_s) if self.hosts and prepare_targets else None
        self.phases = self.ledger.phases if self.ledger is not None else Phases()
        if prepare_targets:
            prepare(self.schedule, path, self.journal, allow)

    def phase(self, unix_time: float) -> str:
        """The window(s) a request that started at `unix_time` ran in (joined by '+'), or baseline: a
        window of this process's by the schedule, a fault host's by what it acknowledged."""
        if self.t0 is None:
            return "baseline"
        names = self.local.active(unix_time - self.t0, self.horizon)
        if self.hosts:
            names += self._remote(unix_time)
        return "+".join(sorted(names)) or "baseline"

    def _remote(self, t: float) -> list[str]:
        if t <= self.phases.settled:
            return list(self.phases.labels(t))
        if self.ledger is not None:  # the master, before the phases are decided: the live state
            return list(self.ledger.provisional(t))
        assert self.t0 is not None  # a worker that never heard: what was planned, unconfirmed
        since = t - self.t0
        return [f"{f.name}{UNCONFIRMED}" for f in self.schedule.faults if f.host and f.covers(since, self.horizon)]

    def settled(self, unix_time: float) -> bool:
        """Whether a request started at `unix_time` can be labelled now (its fault hosts' state known)."""
        return not self.hosts or unix_time <= self.phases.settled

    def start(self, t0: float) -> float:
        """Run this process's windows from unix time `t0` (in threads; returns at once)."""
        self.t0 = t0
        if self.ledger is not None:  # each test its own record; the hosts stay connected
            self.ledger = self.ledger.renewed()
            self.phases = self.ledger.phases
        self.runner = Runner(self.local, self.journal, self.horizon, self.allow)
        return self.runner.start(t0)

    def running(self) -> bool:
        """Whether windows are still to run or to end (the last one ends at the horizon)."""
        return self.runner is not None and self.runner.running()

    def stop(self, timeout: float = 5.0) -> list[FaultWindow]:
        """Revert whatever is active, waiting for those reverts up to `timeout`; the windows as they ran."""
        if self.runner is None:
            return []
        self.runner.stop(timeout=timeout)
        return self.runner.windows()

    def errors(self) -> list[str]:
        """One line per window that failed to apply or to revert, and one if this process still has
        faults in the journal (so a run never ends as a success with a fault still applied)."""
        timeline = self.runner.timeline if self.runner else []
        lines = [f"{a.name}: {a.error}" for a in timeline if a.error]
        left = [e["name"] for e in self.journal.entries() if e["pid"] == os.getpid()]
        if left and not lines:
            lines.append(f"{', '.join(left)}: {LEFT}")
        return lines

    def active(self) -> list[tuple[str, str, str, bool]]:
        """(fault, kind, target, active) for each fault of the schedule, for llmchaos_fault_active."""
        running = set(self.runner.active) if self.runner else set()
        if self.ledger is not None:
            running |= set(self.ledger.provisional(time.time()))
        return [(f.name, f.kind, f.target_key, f.name in running) for f in self.schedule.faults]
