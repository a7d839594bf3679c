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

from faults.session import following, open_timeline
from faults.timeline import FaultClock, PhaseUpdate, Timeline
from llmchaos import tokenizer
from llmchaos.headers import REQUEST_ID_HEADER
from loadtests import locust_table, protocol
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
    """A user as the harness sees it: one client per side, and its stable number (`user_number`)."""

    clients: dict[str, StreamClient]
    number: int


class Harness:
    def __init__(self, env: Environment, source_type: SourceType) -> None:
        self.env = env
        self.collector = Collector({}, 1.0, parsed_options(env).seed)
        self._unsettled: list[RequestRecord] = []  # ended, waiting for their start's phase to be decided
        self.settings = Settings.read(parsed_options(env))
        self.source = source_type(self.settings, env.host or "")
        self.configure()
        tokenizer.load()  # not on the first request's clock
        quiet_gc()
        self.watch = SelfWatch()
        self.warmup_until = 0.0
        self._users: dict[str, int] = {}  # the last number given to a user of each class (user_number)
        # the test is stopping: a request cancelled now is cancelled at stop, and the counting of a
        # request's tokens is given up (`RequestRecord.count_tokens`)
        self.stopping = Event()
        self.exporter: Exporter | None = None  # master / single process: one for the process's life
        self.writer: RunWriter | None = None  # master / single process, from test start to quitting
        self.guard: Guard | None = None  # master / single process with --guard, from test start to quitting
        self.local_done = False  # a single process's share of the source is done
        self._reporting = Semaphore()  # one shipment at a time: see shipment
        self._ending: set[gevent.Greenlet] = set()  # requests whose long texts are being counted
        runner = env.runner
        self.master = protocol.Master(runner, self) if isinstance(runner, MasterRunner) else None
        self.worker = protocol.Worker(runner, self) if isinstance(runner, WorkerRunner) else None
        # the faults' phases: the master (or a single process) runs them; a worker follows its master's
        transport = self.master.runner if self.master is not None else None
        self.timeline: Timeline | None = None
        if self.worker is None:
            self.timeline = open_timeline(self.settings.faults, transport, self._publish)
            if self.settings.energy is not None:  # a fault host's counters come with its acks
                self.settings.energy.attach(self.timeline)
        _HARNESSES[env] = self

    def configure(self) -> None:
        """Read the options; a worker reads them again at test start, when the master's spawn
        message has brought the run's own (a worker starts with its defaults)."""
        self.settings = settings = Settings.read(parsed_options(self.env))
        o = settings.options
        self.collector.slos, self.collector.sample_rate = settings.slos, o.requests_sample
        self.source.configure(settings, self.env.host or "", self.is_worker)

    @property
    def is_master(self) -> bool:
        return isinstance(self.env.runner, MasterRunner)

    @property
    def is_worker(self) -> bool:
        return isinstance(self.env.runner, WorkerRunner)

    def phase(self, unix_time: float) -> str:
        """The phase a request started in: warmup, a fault window's name, or baseline."""
        if unix_time < self.warmup_until:
            return "warmup"
        return self.timeline.phase(unix_time) if self.timeline is not None else "baseline"

    # -- the test's life ---------------------------------------------------------------------------
    def start(self) -> None:
        """Test start: the self-watch; on the master (or a single process) the run's report, the
        fault schedule and the source's plan, each worker's share sent to it."""
        if self.is_worker:
            self.configure()
        self.warmup_until = time.time() + self.settings.warmup_s
        self.stopping.clear()
        self._users = {}
        self.watch.start()
        if self.is_worker:
            return
        self.begin()
        clock = self.timeline.start(time.time() + FAULTS_LEAD_S) if self.timeline is not None else None
        plan_t0 = time.time() + PLAN_LEAD_S
        if self.master is not None:
            self.master.start(clock, plan_t0)
        elif (plan := self.plan(plan_t0, 0, 1)) is not None:
            self.start_source(plan)

    def plan(self, t0: float, worker: int, workers: int) -> dict[str, Any] | None:
        """Worker `worker` of `workers`'s share of the source's plan from unix time `t0`."""
        return self.source.plan(t0, worker, workers)

    def start_source(self, plan: dict[str, Any]) -> None:
        """This process's share of the source's plan (a worker's comes in a message)."""
        self.local_done = False
        self.source.start(plan, self._share_done)

    def follow_faults(self, clock: FaultClock) -> None:
        """A worker: the master's timeline has started (a new test: its phases follow this message,
        which may come before the spawn message brings the test's options)."""
        self.timeline = following(clock)

    def follow_phases(self, update: PhaseUpdate) -> None:
        """A worker: the fault hosts' phases the master decided."""
        if self.timeline is not None:
            self.timeline.absorb(update)
        self._settle()

    def _publish(self, update: PhaseUpdate) -> None:
        """The master: the fault hosts' newly decided phases, to the workers."""
        if self.master is not None:
            self.master.phases(update)
        self._settle()

    def _collect(self, rec: RequestRecord) -> None:
        """Into the collector, labelled with its start's phase once that is decided (a fault host's
        window: once acknowledged; a cluster's step: once its record is read), those that waited
        first (a cluster's reader decides as it reads, with no message to say so)."""
        if self._unsettled and self.timeline is not None and self.timeline.settled(self._unsettled[0].intended):
            self._settle()  # the oldest waiting is decided now: the others likely too
        if self.timeline is not None:
            if not self.timeline.settled(rec.intended):
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

    def stop_begins(self) -> None:
        """Locust is about to stop the users: what they have in flight is cancelled at stop, and the
        run's energy counts up to now (what a server spends on them after is the stop's, not theirs)."""
        self.stopping.set()
        if self.writer is not None:
            self.writer.stop_begins()

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
        if self.timeline is not None and not self.is_worker:  # a worker's only follows its master's
            ended = self.timeline.stop()
            if self.writer is not None:
                self.writer.fault_windows, self.writer.fault_hosts = ended
        gevent.joinall(list(self._ending))
        if self.timeline is not None:  # what waits for its phase is labelled as the timeline stands
            self.timeline.close()
            self._settle()
        if self.master is not None:
            self.master.collect_finals()

    def settled(self) -> bool:
        """The test has stopped and its totals are final (a master has every worker's last data)."""
        from locust.runners import STATE_STOPPED

        runner = self.env.runner
        if not self.stopping.is_set() or runner is None:
            return False
        return self.master.settled() if self.master is not None else runner.state == STATE_STOPPED

    def user_number(self, kind: str) -> int:
        """A new user of class `kind`'s number, the same in whichever process it runs: its order
        among this process's users of the class since test start, interleaved with the other
        workers' (worker w of --expect-workers W numbers w, w + W, w + 2W, ...: unique while no
        more than W join), as Locust deals a class's users out to its workers in turn."""
        w, workers = (0, 1)
        if self.worker is not None:
            w, workers = self.worker.runner.worker_index, parsed_options(self.env).expect_workers
        k = self._users[kind] = self._users.get(kind, -1) + 1
        return k * workers + w

    # -- one request ---------------------------------------------------------------------------
    def request(self, user: Sender, lang: str = "") -> None:
        """The source's next request (for a user of `lang`), sent to its side, or to both at once:
        each side from a greenlet of its own, started one right after the other."""
        due = self.source.next(lang, user.number)
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
                rec.at_stop = rec.outcome == "cancelled" and self.stopping.is_set()
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
            rec.count_tokens(self.stopping)  # before it is added: adding never yields
        self.source.ended(due, recs)
        for rec in recs.values():
            self._collect(rec)
            self.watch.count(rec)
            locust_table.fire(self.env.events.request, rec, len(self.source.sides) > 1)

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
            prefix=due.prefix,
            session=due.conversation.id if due.conversation else due.replay.session_id if due.replay else None,
            turn=due.turn,
            hop=due.hop,
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

    # -- the run's results (master or single process) ------------------------------------------
    def begin(self) -> None:
        o = self.settings.options
        if self.exporter is None:
            self.exporter = Exporter(o.prometheus_port, o.push_gateway, o.push_interval)
        self.writer = self.source.results(
            self.settings,
            self.exporter,
            None if self.is_master else self.collector,
            self.timeline.active if self.timeline is not None else None,
        )
        self._start_guard(self.writer)
        if not self.is_master:
            self.writer.follow_local(self.collector, self.watch)

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
            self.timeline.active if self.timeline is not None else None,
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

    def finish(self) -> None:
        """Write the results, push the last time, print the summary, set the exit code."""
        if self.writer is None:
            return
        if self.guard is not None:
            self.writer.guard_trips = self.guard.close()
        if status := self.writer.finish(self.env.host or ""):
            self.env.process_exit_code = status
        if self.guard is not None and self.guard.stopped:
            self.env.process_exit_code = EXIT_STOPPED
        self.writer, self.guard = None, None
