"""One run of a fault schedule, the same for `llmchaos faults run` and for Locust's `--schedule`:
load and validate it, sweep leftovers and probe every target, run it from a start time, stop
(reverting whatever is active), and give back the windows as they ran. A `FaultSession` is a
`Timeline` (faults/timeline.py); `open_timeline` gives a load test's master (or single process) its
timeline, a schedule's or a cluster Workflow's, and `following` gives a worker the one its master
started.

Windows whose target names a fault host (`target.host`) are not run here: a Locust master leases
them to their hosts (`FaultHosts`, faults/host/master.py, which keeps their record in its ledger);
their phases are what the hosts acknowledged, decided on the master and sent to its workers."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from faults.allow import Allowlist
from faults.host.ledger import UNCONFIRMED, Ledger
from faults.host.master import FaultHosts, Transport
from faults.injectors import KINDS, admin
from faults.injectors.base import FieldError
from faults.journal import DEFAULT, LEFT, Journal
from faults.recover import recover
from faults.runner import Runner
from faults.schedule import HORIZON_S, Schedule, load
from faults.timeline import Active, FaultClock, Phases, PhaseUpdate, Segment, Timeline
from llmchaos.errors import UsageError
from llmchaos.run import FaultHost, FaultWindow

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


@dataclass(frozen=True)
class FaultOptions:
    """A load test's faults, as its options give them (Locust's --schedule and the options beside it)."""

    schedule: str = ""
    workflow: str = ""  # --k8s-workflow: the cluster runs the faults; the phases are its record of them
    journal: str | None = None
    horizon: float | None = None  # the run's length (-t), else the schedule's own horizon
    allow: Allowlist = Allowlist()
    lease_s: float = LEASE_S
    secret_file: str = ""
    host_wait_s: float = 30.0


class FaultSession:
    """`prepare_targets=False` for a process that only tags requests with phases (a Locust worker):
    it reads the schedule and never touches the journal or a target. On a master, `hosts` is the
    master's end of the schedule's fault hosts (`open_timeline` attaches it)."""

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
        self.local, self.remote = self.schedule.on(None), self.schedule.hosts()
        self.horizon = horizon or HORIZON_S
        self.journal = Journal(journal or DEFAULT)
        self.allow = allow
        self.t0: float | None = None  # unix time the schedule started (as this process heard it)
        self.runner: Runner | None = None
        self.hosts: FaultHosts | None = None
        self.heard = Phases()  # a worker: the fault hosts' phases its master decided
        self.on_phases: Callable[[PhaseUpdate], None] = lambda update: None
        if prepare_targets:
            prepare(self.schedule, path, self.journal, allow)

    @property
    def phases(self) -> Phases:
        """The fault hosts' decided phases: the master's ledger's, or what a worker heard of them."""
        return self.hosts.ledger.phases if self.hosts is not None else self.heard

    def phase(self, unix_time: float) -> str:
        """The window(s) a request that started at `unix_time` ran in (joined by '+'), or baseline: a
        window of this process's by the schedule, a fault host's by what it acknowledged."""
        if self.t0 is None:
            return "baseline"
        names = self.local.active(unix_time - self.t0, self.horizon)
        if self.remote:
            names += self._remote(unix_time)
        return "+".join(sorted(names)) or "baseline"

    def _remote(self, t: float) -> list[str]:
        if t <= self.phases.settled:
            return list(self.phases.labels(t))
        if self.hosts is not None:  # the master, before the phases are decided: the live state
            return list(self.hosts.ledger.provisional(t))
        assert self.t0 is not None  # a worker that never heard: what was planned, unconfirmed
        since = t - self.t0
        return [f"{f.name}{UNCONFIRMED}" for f in self.schedule.faults if f.host and f.covers(since, self.horizon)]

    def settled(self, unix_time: float) -> bool:
        """Whether a request started at `unix_time` can be labelled now (its fault hosts' state known)."""
        return not self.remote or unix_time <= self.phases.settled

    def start(self, t0: float) -> FaultClock:
        """Run this process's windows from unix time `t0` (in threads; returns at once) and lease the
        fault hosts theirs."""
        self.t0 = t0
        self.runner = Runner(self.local, self.journal, self.horizon, self.allow)
        self.runner.start(t0)
        if self.hosts is not None:
            self.hosts.start(t0)
        return FaultClock(t0, schedule=self.path, horizon=self.horizon)

    def follow(self, clock: FaultClock) -> None:
        self.t0, self.heard = clock.t0, Phases()

    def absorb(self, update: PhaseUpdate) -> None:
        self.heard.absorb(update)

    def close(self) -> None:
        """Nothing: the master's last update decides the fault hosts' phases, on every process."""

    def _publish(self, segments: list[Segment], final: bool) -> None:
        """The master's fault hosts decided `segments` (the last time: settled for good)."""
        if final:
            self.phases.settled = math.inf
        self.on_phases(self.phases.update(segments))

    def running(self) -> bool:
        """Whether windows are still to run or to end (the last one ends at the horizon)."""
        return self.runner is not None and self.runner.running()

    def stop(self, timeout: float = 5.0) -> tuple[list[FaultWindow], list[FaultHost]]:
        """Revert whatever is active, waiting for those reverts up to `timeout` (and for the fault
        hosts to say theirs); the windows as they ran, and the fault hosts."""
        windows: list[FaultWindow] = []
        if self.runner is not None:
            self.runner.stop(timeout=timeout)
            windows = self.runner.windows()
        if self.hosts is None:
            return windows, []
        remote, hosts = self.hosts.stop()
        return sorted([*windows, *remote], key=lambda w: w.planned_start), hosts

    def errors(self) -> list[str]:
        """One line per window that failed to apply or to revert, and one if this process still has
        faults in the journal (so a run never ends as a success with a fault still applied)."""
        timeline = self.runner.timeline if self.runner else []
        lines = [f"{a.name}: {a.error}" for a in timeline if a.error]
        left = [e["name"] for e in self.journal.entries() if e["pid"] == os.getpid()]
        if left and not lines:
            lines.append(f"{', '.join(left)}: {LEFT}")
        return lines

    def active(self) -> list[Active]:
        """(fault, kind, target, active) for each fault of the schedule, for llmchaos_fault_active."""
        running = set(self.runner.active) if self.runner else set()
        if self.hosts is not None:
            running |= set(self.hosts.ledger.provisional(time.time()))
        return [(f.name, f.kind, f.target_key, f.name in running) for f in self.schedule.faults]

    def energy(self, host: str) -> tuple[dict[str, list[tuple[float, float]]], str | None]:
        """The GPU energy counters (mJ, master clock) fault host `host` read with its acks (the ledger's)."""
        if self.hosts is None:
            return {}, f"fault host {host} was never leased"
        return self.hosts.ledger.energy(host)

    def single_process(self) -> UsageError:
        """The refusal of a schedule with fault hosts in a single process: they join a master's port."""
        f = next(f for f in self.schedule.faults if f.host)
        return UsageError(
            f"fault host {f.host!r} joins a Locust master: run with --master and workers (or --processes)",
            file=self.path,
            line=f.target_line,
            field=f"faults[{f.index}].target.host",
        )


def open_timeline(
    options: FaultOptions, transport: Transport | None, on_phases: Callable[[PhaseUpdate], None]
) -> Timeline | None:
    """A master's (`transport`: how it reaches its fault hosts) or a single process's timeline: its
    schedule's, with every fault host connected and probed, or its cluster Workflow's; None without
    faults. `on_phases` hears the fault hosts' phases as they are decided."""
    if options.workflow:  # the cluster runs the faults; the phases are its record of them
        if options.schedule:
            raise UsageError("give --schedule or --k8s-workflow, not both", field="--k8s-workflow")
        from faults.k8s import phases  # the Kubernetes client, only for a cluster's phases

        return phases.shared(options.workflow)
    if not options.schedule:
        return None
    session = FaultSession(options.schedule, options.journal, options.horizon, options.allow)
    session.on_phases = on_phases
    admin.quiet()
    if session.remote:
        if transport is None:
            raise session.single_process()
        ledger = Ledger(session.schedule, session.horizon, options.lease_s, options.lease_s)
        specs = [f for f in session.schedule.faults if f.host]
        session.hosts = FaultHosts.of(
            transport, session.path, specs, ledger, session._publish, options.secret_file, options.host_wait_s
        )
    return session


def following(clock: FaultClock) -> Timeline | None:
    """A worker's timeline: the one its master started (`clock`), followed; None without faults."""
    timeline: Timeline | None = None
    if clock.workflow:
        from faults.k8s import phases

        timeline = phases.shared(clock.workflow)
    elif clock.schedule:
        timeline = FaultSession(clock.schedule, horizon=clock.horizon, prepare_targets=False)
    if timeline is not None:
        timeline.follow(clock)
    return timeline
