"""The harness in every Locust process: it takes each request from its source, sends it to its
side(s), measures it and tags it with its phase. One harness for every kind of test: the source
(closed loop, open loop, a log) and the sides (one target, or A and B) are what differ.

Reached through `harness(environment)`. It owns its test's start, stop and finish (the plugin
only forwards Locust's events); on the master (or a single process) it holds the run's `RunWriter`
from test start to the end; the messages between master and workers are `protocol`'s.
"""

from __future__ import annotations

import dataclasses
import gc
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from weakref import WeakKeyDictionary

import gevent
from gevent.event import Event
from gevent.lock import Semaphore
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from faults.host.ledger import Phases, Segment
from faults.host.master import FaultHosts, single_process
from faults.k8s import phases
from faults.session import FaultSession
from llmchaos import tokenizer
from llmchaos.errors import UsageError
from llmchaos.headers import REQUEST_ID_HEADER
from llmchaos.run import FaultWindow
from loadtests import protocol
from loadtests.adapters import ADAPTERS
from loadtests.collector import Collector
from loadtests.exporters import Exporter
from loadtests.guard import EXIT_STOPPED, Guard
from loadtests.options import Settings, parsed_options
from loadtests.record import RequestRecord
from loadtests.selfwatch import SelfWatch
from loadtests.sources import Due, Source

if TYPE_CHECKING:
    from loadtests.results import RunWriter
    from loadtests.stream_client import StreamClient

LOCAL = "local"  # a single process's name among the generator's processes
MAX_ENDING = 4  # requests counted apart at once (each holds its text); beyond, a user waits its turn
FAULTS_LEAD_S, PLAN_LEAD_S = 0.5, 1.0  # the schedule and the source's plan start this long after test start
SourceType = Callable[[Settings, str], Source]
_HARNESSES: WeakKeyDictionary[Environment, Harness] = WeakKeyDictionary()


def harness(environment: Environment) -> Harness:
    """The harness of a Locust environment (the plugin made it at init)."""
    return _HARNESSES[environment]


def quiet_gc() -> None:
    """Full collections of Locust's large heap pause every stream for 40-60 ms: move what exists
    now out of the collector's reach and collect the young generations less often."""
    gc.freeze()
    gc.set_threshold(10_000, 50, 1_000)


class Sender(Protocol):
    """A user as the harness sees it: one client per side."""

    clients: dict[str, StreamClient]


class Harness:
    def __init__(self, env: Environment, source_type: SourceType) -> None:
        self.env = env
        self.collector = Collector({}, 1.0, parsed_options(env).seed)
        self.faults: FaultSession | phases.ClusterPhases | None = None
        self.fault_t0: float | None = None  # the master's schedule start, as a worker hears it
        self.remote_phases = Phases()  # the fault hosts' phases, as a worker hears them
        self._unsettled: list[RequestRecord] = []  # ended, waiting for their start's phase to be decided
        self.settings = Settings.read(parsed_options(env))
        self.source = source_type(self.settings, env.host or "")
        self.configure()
        tokenizer.load()  # not on the first request's clock
        quiet_gc()
        self.watch = SelfWatch()
        self.warmup_until = 0.0
        self._stopping = Event()
        self.fault_timeline: list[FaultWindow] = []
        self.exporter: Exporter | None = None  # master / single process: one for the process's life
        self.writer: RunWriter | None = None  # master / single process, from test start to quitting
        self.guard: Guard | None = None  # master / single process with --guard, from test start to quitting
        self.local_done = False  # a single process's share of the source is done
        self._local_loop: gevent.Greenlet | None = None
        self._local_done = Event()
        self._reporting = Semaphore()  # one shipment at a time: see shipment
        self._ending: set[gevent.Greenlet] = set()  # requests whose long texts are being counted
        runner = env.runner
        self.master = protocol.Master(runner, self) if isinstance(runner, MasterRunner) else None
        self.worker = protocol.Worker(runner, self) if isinstance(runner, WorkerRunner) else None
        self.hosts = self._fault_hosts()
        _HARNESSES[env] = self

    def _fault_hosts(self) -> FaultHosts | None:
        """The master's end of its fault hosts, when it has a schedule that names any."""
        if self.master is None or not isinstance(self.faults, FaultSession):
            return None
        o = parsed_options(self.env)
        wait = getattr(o, "fault_host_wait", 30.0)
        return FaultHosts.of(self.master.runner, self.faults, self._publish, getattr(o, "fault_secret_file", ""), wait)

    def configure(self) -> None:
        """Read the options; a worker reads them again at test start, when the master's spawn
        message has brought the run's own (a worker starts with its defaults)."""
        self.settings = settings = Settings.read(parsed_options(self.env))
        o = settings.options
        self.faults = (
            FaultSession(
                o.schedule,
                o.fault_journal or None,
                o.run_time,
                settings.allow,
                prepare_targets=not self.is_worker,
                lease_s=o.fault_lease,
            )
            if o.schedule
            else None
        )
        if self.faults is not None and self.faults.hosts and not (self.is_master or self.is_worker):
            raise single_process(self.faults)
        if o.k8s_workflow:  # the cluster runs the faults; the phases are its record of them
            if o.schedule:
                raise UsageError("give --schedule or --k8s-workflow, not both", field="--k8s-workflow")
            self.faults = phases.shared(o.k8s_workflow)
        if isinstance(self.faults, FaultSession) and self.is_worker:
            self.faults.phases = self.remote_phases
        if self.faults is not None and self.fault_t0 is not None:
            self.faults.t0 = self.fault_t0
        self.collector.slos, self.collector.sample_rate = settings.slos, o.requests_sample
        self.source.configure(settings, self.env.host or "", self.is_worker)

    @property
    def is_master(self) -> bool:
        return isinstance(self.env.runner, MasterRunner)

    @property
    def is_worker(self) -> bool:
        return isinstance(self.env.runner, WorkerRunner)

    @property
    def stopping(self) -> bool:
        """The test is stopping: a request cancelled now is cancelled at stop, and the counting of a
        request's tokens is given up (`RequestRecord.count_tokens`)."""
        return self._stopping.is_set()

    @stopping.setter
    def stopping(self, value: bool) -> None:
        if value:
            self._stopping.set()
        else:
            self._stopping.clear()

    def phase(self, unix_time: float) -> str:
        """The phase a request started in: warmup, a fault window's name, or baseline."""
        if unix_time < self.warmup_until:
            return "warmup"
        return self.faults.phase(unix_time) if self.faults else "baseline"

    # -- the test's life ---------------------------------------------------------------------------
    def start(self) -> None:
        """Test start: the self-watch; on the master (or a single process) the run's report, the
        fault schedule and the source's plan, each worker's share sent to it."""
        if self.is_worker:
            self.configure()
        self.warmup_until, self.stopping = time.time() + self.settings.warmup_s, False
        self.watch.start()
        if self.is_worker:
            return
        self.begin()
        fault_t0 = self.faults.start(time.time() + FAULTS_LEAD_S) if self.faults else None
        if self.hosts is not None and fault_t0 is not None:
            self.hosts.start(fault_t0)
        plan_t0 = time.time() + PLAN_LEAD_S
        if self.master is not None:
            self.master.start(fault_t0, plan_t0)
        elif (plan := self.plan(plan_t0, 0, 1)) is not None:
            self.start_source(plan)

    def plan(self, t0: float, worker: int, workers: int) -> dict[str, Any] | None:
        """Worker `worker` of `workers`'s share of the source's plan from unix time `t0`."""
        return self.source.plan(t0, worker, workers)

    def start_source(self, plan: dict[str, Any]) -> None:
        """This process's share of the source's plan (a worker's comes in a message)."""
        self.local_done = False
        self.source.start(plan, self._share_done)

    def follow_faults(self, clock: protocol.FaultClock) -> None:
        """The master's fault schedule start (it may come before the spawn message brings the schedule)."""
        self.fault_t0 = clock.t0
        self.remote_phases = Phases()  # a new test: its phases follow this message
        if self.faults is not None:
            self.faults.t0 = clock.t0
        if isinstance(self.faults, FaultSession):
            self.faults.phases = self.remote_phases

    def follow_phases(self, update: protocol.PhaseUpdate) -> None:
        """The fault hosts' phases the master decided: label the requests whose start they settle."""
        self.remote_phases.absorb({"segments": update.segments, "settled": update.settled})
        self._settle()

    def _publish(self, segments: list[Segment], final: bool) -> None:
        """The master: newly decided phases to the workers (the last time, settled for good)."""
        assert isinstance(self.faults, FaultSession)
        settled = float("inf") if final else self.faults.phases.settled
        if final:
            self.faults.phases.settled = settled
        if self.master is not None:
            self.master.phases(protocol.PhaseUpdate([[s.start, s.end, list(s.labels)] for s in segments], settled))
        self._settle()

    def _collect(self, rec: RequestRecord) -> None:
        """Into the collector, once the phase of its start is decided (with fault hosts: acknowledged)."""
        if isinstance(self.faults, FaultSession) and self.faults.hosts:
            if not self.faults.settled(rec.intended):
                self._unsettled.append(rec)
                return
            rec.phase = self.phase(rec.intended)
        self.collector.add(rec)

    def _settle(self) -> None:
        waiting, self._unsettled = self._unsettled, []
        for rec in waiting:
            self._collect(rec)

    def _share_done(self) -> None:
        if self.worker is not None:
            self.worker.share_done()
        else:
            self.local_done = True

    def finished(self) -> bool:
        """Every request of the source has been sent and has ended (on every worker)."""
        return self.master.all_shares_done() if self.master is not None else self.local_done

    def stop(self) -> None:
        """Test stop: what was due and never sent counts as cancelled at stop, the faults end (before
        anything else), the master collects its workers' last data; requests still being counted are
        waited for, so that none is lost."""
        for due in self.source.stop():
            for side in due.sides:
                rec = self._record(due, side, "")
                rec.sent, rec.outcome, rec.at_stop = time.time(), "cancelled", True
                rec.error = "never sent: test stopped"
                self._collect(rec)
        if self.faults and not self.is_worker:
            self.fault_timeline = self.faults.stop()
        if self.hosts is not None:
            windows, hosts = self.hosts.stop()
            self.fault_timeline = sorted([*self.fault_timeline, *windows], key=lambda w: w.planned_start)
            if self.writer is not None:
                self.writer.fault_hosts = hosts
        gevent.joinall(list(self._ending))
        if self.master is not None:
            self.master.collect_finals()

    def settled(self) -> bool:
        """The test has stopped and its totals are final (a master has every worker's last data)."""
        from locust.runners import STATE_STOPPED

        runner = self.env.runner
        if not self.stopping or runner is None:
            return False
        return self.master.settled() if self.master is not None else runner.state == STATE_STOPPED

    # -- one request ---------------------------------------------------------------------------
    def request(self, user: Sender, lang: str = "") -> None:
        """The source's next request (for a user of `lang`), sent to its side, or to both at once:
        each side from a greenlet of its own, started one right after the other."""
        due = self.source.next(lang)
        recs: dict[str, RequestRecord] = {}
        rid = uuid.uuid4().hex
        try:
            if len(due.sides) == 1:
                self._send(user, due, due.sides[0], rid, recs)
            else:
                sends = [gevent.spawn(self._send, user, due, side, rid, recs) for side in due.sides]
                try:
                    gevent.joinall(sends)
                finally:
                    gevent.killall(sends)  # only when this user was stopped: the test is ending
        finally:
            for rec in recs.values():
                rec.at_stop = rec.outcome == "cancelled" and self.stopping
            if any(rec.counts_long for rec in recs.values()):
                self._ended_apart(due, recs)
            else:
                self._ended(due, recs)

    def _ended_apart(self, due: Due, recs: dict[str, RequestRecord]) -> None:
        """End a request with long texts to count in a greenlet of its own, so that its user goes on
        (and a user stopped meanwhile loses nothing); a user waits only while MAX_ENDING are."""
        ending = gevent.spawn(self._ended, due, recs)
        self._ending.add(ending)
        ending.link(self._ending.discard)
        while len(self._ending) > MAX_ENDING:
            gevent.wait(list(self._ending), count=1)

    def _ended(self, due: Due, recs: dict[str, RequestRecord]) -> None:
        """A request has ended: its tokens counted, its source told, its records collected."""
        for rec in recs.values():
            rec.count_tokens(self._stopping)  # before it is added: adding never yields
        self.source.ended(due, recs)
        for rec in recs.values():
            self._collect(rec)
            self.watch.count(rec)
            self._locust_stats(rec)

    def _record(self, due: Due, side: str, rid: str) -> RequestRecord:
        intended = time.time() if due.intended is None else due.intended
        return RequestRecord(
            lang=due.lang,
            api=due.api,
            target=self.source.sides[side],
            phase=self.phase(intended),
            request_id=rid,
            open_loop=due.intended is not None,
            intended=intended,
            replay=dataclasses.replace(due.replay) if due.replay is not None else None,
            side=side,
            prepare_s=due.prepare_s,
        )

    def _send(self, user: Sender, due: Due, side: str, rid: str, recs: dict[str, RequestRecord]) -> None:
        assert due.call is not None  # a request handed to a user has its call
        recs[side] = rec = self._record(due, side, rid)
        call = dataclasses.replace(due.call, headers={**due.call.headers, REQUEST_ID_HEADER: rid})
        now_unix, now_perf = time.time(), time.perf_counter()
        if due.intended is None:  # closed loop: due now
            rec.intended = now_unix
        stream = not self.settings.options.no_stream
        user.clients[side].run(ADAPTERS[due.api], call, stream, rec, now_perf - (now_unix - rec.intended))

    def _locust_stats(self, rec: RequestRecord) -> None:
        """TTFT and E2E per language (and side, with two) in Locust's own table (and web UI)."""
        fire = self.env.events.request.fire
        name = f"{rec.side} {rec.lang}" if len(self.source.sides) > 1 else rec.lang
        if rec.ttft is not None:
            fire(
                request_type="TTFT",
                name=name,
                response_time=rec.ttft * 1000.0,
                response_length=0,
                exception=None,
                context={},
            )
        if rec.outcome == "cancelled":  # the test stopped it: not the target's failure
            return
        failed = None if rec.outcome == "ok" else Exception(f"{rec.outcome}: {rec.error or ''}"[:200])
        fire(
            request_type="E2E",
            name=name,
            response_time=(rec.e2e or 0.0) * 1000.0,
            response_length=rec.output_tokens if rec.outcome == "ok" else 0,
            exception=failed,
            context={},
        )

    # -- the run's results (master or single process) ------------------------------------------
    def begin(self) -> None:
        o = self.settings.options
        if self.exporter is None:
            self.exporter = Exporter(o.prometheus_port, o.push_gateway, o.push_interval)
        self.writer = self.source.results(
            self.settings,
            self.exporter,
            None if self.is_master else self.collector,
            self.faults.active if self.faults else None,
        )
        self._start_guard(self.writer)
        if not self.is_master:
            self._local_done.clear()
            self._local_loop = gevent.spawn(self._local_merge_loop)

    def _start_guard(self, writer: RunWriter) -> None:
        """The live guard, on the merged totals from test start (`--guard`)."""
        config = self.settings.guard
        if config is None:
            return
        runner = self.env.runner
        self.guard = Guard(
            config,
            writer.run_id,
            lambda: self.writer.merged.hist if self.writer is not None else None,
            self.phase,
            lambda: runner.quit() if runner is not None else None,
        )
        self.guard.start(writer.started)

    def shipment(self, streaming: bool) -> protocol.Shipment:
        """What this process ships to the master: its collector's data, self-watch and source's. One at
        a time: the final shipment at stop waits for a periodic one still counting its records' tokens
        (seconds on a busy machine, at nice 19), which its caller sends as soon as this returns;
        otherwise the final went first and the master closed the run without those records."""
        with self._reporting:
            return protocol.Shipment(
                self.collector.drain(streaming=streaming), self.watch.drain(), self.source.shipment()
            )

    def absorb(self, process: str, shipment: protocol.Shipment) -> None:
        if self.writer is not None:
            self.writer.absorb(process, shipment)

    def _local_merge_loop(self) -> None:
        """A single process shares its collector with the totals; only records need writing out,
        every second until `finish` says done (a flush is never cut short: it holds taken records)."""
        while not self._local_done.wait(1.0):
            self._flush_local()

    def _flush_local(self) -> None:
        if self.writer is not None:
            self.writer.merged.write_records(self.collector.take_records())
            self.writer.merged.watch(LOCAL, self.watch.drain())

    def finish(self) -> None:
        """Write the results, push the last time, print the summary, set the exit code."""
        if self.writer is None:
            return
        if self._local_loop is not None:
            self._local_done.set()
            self._local_loop.join()
            self._local_loop = None
            self._flush_local()
        if self.guard is not None:
            self.writer.guard_trips = self.guard.close()
        if status := self.writer.finish(self.env.host or "", self.fault_timeline):
            self.env.process_exit_code = status
        if self.guard is not None and self.guard.stopped:
            self.env.process_exit_code = EXIT_STOPPED
        self.writer, self.guard = None, None
