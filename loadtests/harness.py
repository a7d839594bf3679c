"""The harness in every Locust process: it measures each request and tags it with its phase.

Reachable as `environment.llmchaos`. On the master (or a single process) it also holds the
run's `Report` from test start to the end.
"""

from __future__ import annotations

import gc
import random
import time
import uuid
from typing import Any

import gevent
from gevent.event import Event
from gevent.lock import Semaphore
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from faults.k8s import phases
from faults.session import FaultSession
from llmchaos import tokenizer
from llmchaos.errors import UsageError
from llmchaos.run import FaultWindow
from llmchaos.wire import REQUEST_ID_HEADER
from loadtests.arrivals import ArrivalPlan, Arrivals
from loadtests.collector import Collector
from loadtests.exporters import Exporter
from loadtests.guard import EXIT_STOPPED, Guard
from loadtests.merge import Finals
from loadtests.options import Settings, parsed_options
from loadtests.prompts import LongContextSource, PromptSource
from loadtests.record import RequestRecord
from loadtests.report import Report
from loadtests.selfwatch import SelfWatch
from loadtests.users import LLMUser

LOCAL = "local"  # a single process's name among the generator's processes


def quiet_gc() -> None:
    """Full collections of Locust's large heap pause every stream for 40-60 ms: move what exists
    now out of the collector's reach and collect the young generations less often."""
    gc.freeze()
    gc.set_threshold(10_000, 50, 1_000)


class Harness:
    def __init__(self, env: Environment) -> None:
        self.env = env
        self.collector = Collector({}, 1.0, parsed_options(env).seed)
        self.faults: FaultSession | phases.ClusterPhases | None = None
        self.fault_t0: float | None = None  # the master's schedule start, as a worker hears it
        self.configure()
        tokenizer.load()  # not on the first request's clock
        quiet_gc()
        self.watch = SelfWatch()
        self.arrivals = Arrivals()
        self.warmup_until = 0.0
        self.stopping = False  # the test is stopping: a request cancelled now is cancelled at stop
        self.finals = Finals()
        self.fault_timeline: list[FaultWindow] = []
        self.exporter: Exporter | None = None  # master / single process: one for the process's life
        self.report: Report | None = None  # master / single process, from test start to quitting
        self.guard: Guard | None = None  # master / single process with --guard, from test start to quitting
        self._local_loop: gevent.Greenlet | None = None
        self._local_done = Event()
        self._reporting = Semaphore()  # one worker report at a time: see report_data

    def configure(self) -> None:
        """Read the options; a worker reads them again at test start, when the master's spawn
        message has brought the run's own (a worker starts with its defaults)."""
        self.settings = settings = Settings.read(parsed_options(self.env))
        self._rng = random.Random(settings.options.seed)
        o = settings.options
        self.faults = (
            FaultSession(
                o.schedule, o.fault_journal or None, o.run_time, settings.allow, prepare_targets=not self.is_worker
            )
            if o.schedule
            else None
        )
        if o.k8s_workflow:  # the cluster runs the faults; the phases are its record of them
            if o.schedule:
                raise UsageError("give --schedule or --k8s-workflow, not both", field="--k8s-workflow")
            self.faults = phases.shared(o.k8s_workflow)
        if self.faults is not None and self.fault_t0 is not None:
            self.faults.t0 = self.fault_t0
        self.collector.slos, self.collector.sample_rate = settings.slos, o.requests_sample

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
        return self.faults.phase(unix_time) if self.faults else "baseline"

    def prompt_source(self, lang: str) -> PromptSource | LongContextSource:
        rng = random.Random(self._rng.random())
        o = self.settings.options
        if o.long_context_tokens > 0:
            return LongContextSource(lang, o.long_context_tokens, rng)
        return PromptSource(lang, rng, self.settings.prompt_sizes or None)

    # -- one request ---------------------------------------------------------------------------
    def request(self, user: LLMUser) -> None:
        """One measured request; in open loop it waits for this language's next arrival first."""
        s = self.settings
        o = s.options
        intended = self.arrivals.next(user.lang) if s.open_loop else None
        call = s.adapter.call(
            o.model, user.prompts.next(), user.lang, o.max_tokens, not o.no_stream, o.lang_in_body, o.api_key
        )
        rid = uuid.uuid4().hex
        call.headers[REQUEST_ID_HEADER] = rid
        now_unix, now_perf = time.time(), time.perf_counter()
        intended = now_unix if intended is None else intended
        rec = RequestRecord(
            user.lang, s.adapter.name, user.host or "", self.phase(intended), rid, s.open_loop, intended
        )
        try:
            user.client.run(s.adapter, call, not o.no_stream, rec, now_perf - (now_unix - intended))
        finally:
            rec.at_stop = rec.outcome == "cancelled" and self.stopping
            rec.count_tokens()  # before it is added: adding never yields
            self.collector.add(rec)
            self.watch.count(rec)
            self._locust_stats(rec)

    def _locust_stats(self, rec: RequestRecord) -> None:
        """TTFT and E2E per language in Locust's own table (and web UI)."""
        fire, name = self.env.events.request.fire, self.stats_name(rec)
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

    def stats_name(self, rec: RequestRecord) -> str:
        """The row of Locust's table a request counts in."""
        return rec.lang

    # -- open loop ------------------------------------------------------------------------------
    def arrival_plan(self, t0: float, worker: int = 0, workers: int = 1) -> dict[str, Any] | None:
        """What worker `worker` of `workers` is sent at test start to issue its share of the open-loop
        schedule from unix time `t0` (the whole of it in a single process); None in closed loop."""
        if not self.settings.open_loop:
            return None
        return ArrivalPlan.for_run(self.settings, t0, worker, workers).message()

    def start_arrivals(self, plan: dict[str, Any]) -> None:
        self.arrivals.start(ArrivalPlan.from_message(plan))

    def stop_arrivals(self) -> None:
        """Stop issuing; arrivals due but never sent count as cancelled, never dropped."""
        for lang, due in self.arrivals.stop():
            self.collector.add(
                RequestRecord(
                    lang,
                    self.settings.adapter.name,
                    self.env.host or "",
                    self.phase(due),
                    open_loop=True,
                    intended=due,
                    sent=time.time(),
                    outcome="cancelled",
                    error="never sent: test stopped",
                    at_stop=True,
                )
            )

    # -- the run's results (master or single process) ------------------------------------------
    def begin(self) -> None:
        o = self.settings.options
        if self.exporter is None:
            self.exporter = Exporter(o.prometheus_port, o.push_gateway, o.push_interval)
        self.report = self.new_report(self.exporter)
        self._start_guard(self.report)
        if not self.is_master:
            self._local_done.clear()
            self._local_loop = gevent.spawn(self._local_merge_loop)

    def new_report(self, exporter: Exporter) -> Report:
        """The run's report, from test start (a single process shares its collector with it)."""
        return Report(
            self.settings,
            exporter,
            None if self.is_master else self.collector,
            self.faults.active if self.faults else None,
        )

    def _start_guard(self, report: Report) -> None:
        """The live guard, on the merged totals from test start (`--guard`)."""
        config = self.settings.guard
        if config is None:
            return
        runner = self.env.runner
        self.guard = Guard(
            config,
            report.run_id,
            lambda: self.report.merged.hist if self.report is not None else None,
            self.phase,
            lambda: runner.quit() if runner is not None else None,
        )
        self.guard.start(report.started)

    def report_data(self, streaming: bool) -> dict[str, Any]:
        """What a worker sends the master: its collector's data and its self-watch samples. One at
        a time: the final report at stop waits for a periodic one still counting its records'
        tokens (seconds on a busy machine, at nice 19), which its caller sends as soon as this
        returns; otherwise the final went first and the master closed the run without those records."""
        with self._reporting:
            return {"collector": self.collector.report(streaming=streaming), "watch": self.watch.drain()}

    def absorb(self, process: str, data: dict[str, Any]) -> None:
        if self.report is not None:
            self.report.absorb(process, data)

    def _local_merge_loop(self) -> None:
        """A single process shares its collector with the totals; only records need writing out,
        every second until `finish` says done (a flush is never cut short: it holds taken records)."""
        while not self._local_done.wait(1.0):
            self._flush_local()

    def _flush_local(self) -> None:
        if self.report is not None:
            self.report.merged.write_records(self.collector.take_records())
            self.report.merged.watch(LOCAL, self.watch.drain())

    def finish(self) -> None:
        """Write the results, push the last time, print the summary, set the exit code."""
        if self.report is None:
            return
        if self._local_loop is not None:
            self._local_done.set()
            self._local_loop.join()
            self._local_loop = None
            self._flush_local()
        if self.guard is not None:
            self.report.guard_trips = self.guard.close()
        if self.report.finish(self.env.host or "", self.fault_timeline):
            self.env.process_exit_code = 1
        if self.guard is not None and self.guard.stopped:
            self.env.process_exit_code = EXIT_STOPPED
        self.report, self.guard = None, None
