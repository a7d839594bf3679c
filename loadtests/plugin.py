"""Wires llmchaos into Locust: options, measurement, the master's exact merge, results, exporters.

Every process measures into a `Collector`; workers ship it with Locust's
`report_to_master` and the master merges it (HDR histograms add exactly). The
master (or the single process) writes the results directory, serves and pushes
Prometheus metrics, and sets the exit code for `--check-slo`.
"""

from __future__ import annotations

import functools
import gc
import logging
import random
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import IO

import gevent
from gevent.queue import Queue
from locust import argument_parser, events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner
from prometheus_client import start_http_server

from faults import allow
from faults.session import FaultSession
from llmchaos import languages, results, tokenizer
from llmchaos.errors import UsageError
from llmchaos.units import duration
from llmchaos.wire import REQUEST_ID_HEADER
from loadtests import arrivals, exporters, profile, slo
from loadtests.adapters import ADAPTERS
from loadtests.collector import Collector, Merged
from loadtests.prompts import LongContextSource, PromptSource
from loadtests.record import RequestRecord
from loadtests.selfwatch import SelfWatch, verdict

log = logging.getLogger("llmchaos")
ARRIVALS_MSG = "llmchaos_arrivals"
FAULTS_MSG = "llmchaos_faults"
FLUSH_MSG, FINAL_MSG = "llmchaos_flush", "llmchaos_final"  # the master collects the workers' last data
FINAL_WAIT_S = 15.0


def add_arguments(parser) -> None:  # noqa: ANN001 - Locust's configargparse parser
    g = parser.add_argument_group("llmchaos")
    g.add_argument("--api", choices=sorted(ADAPTERS), default="openai-chat", help="the target's API")
    g.add_argument("--model", default="llmchaos-sim-8b")
    g.add_argument("--api-key", default=None, env_var="LLMCHAOS_API_KEY")
    g.add_argument("--langs", default="", help="comma-separated language tags (default: all)")
    g.add_argument("--max-tokens", type=int, default=128)
    g.add_argument("--no-stream", action="store_true", help="non-streaming requests")
    g.add_argument("--lang-in-body", action="store_true",
                   help="also send the language as OpenAI metadata / Gemini labels")
    g.add_argument("--prompt-sizes", default="", help="e.g. short,medium (default: all)")
    g.add_argument("--long-context-tokens", type=int, default=0,
                   help="use generated prompts of this many tokens instead of the corpus prompts")
    g.add_argument("--seed", type=int, default=0, help="seed for prompt draws and arrivals")
    g.add_argument("--think-time", type=float, default=0.0,
                   help="closed loop: each user waits uniform(0, T) seconds between its requests")
    g.add_argument("--warmup", default="0s", help="requests started this long after test start are in "
                   "phase 'warmup', kept apart from the baseline (spawning, new connections)")
    g.add_argument("--stall-limit", type=float, default=30.0, help="seconds between events = stalled")
    g.add_argument("--request-timeout", type=float, default=600.0)
    g.add_argument("--connect-timeout", type=float, default=5.0)
    g.add_argument("--rate", type=float, default=0.0, help="open loop: requests/s over all workers")
    g.add_argument("--arrival", choices=["poisson", "gamma", "constant"], default="poisson")
    g.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1 = Poisson)")
    g.add_argument("--load-profile", default="",
                   help="YAML load profile (stages of users or rate); Locust owns --profile")
    g.add_argument("--shape", choices=["", "step", "ramp", "spike", "soak"], default="")
    g.add_argument("--levels", default="", help="shape levels, e.g. 50,200,500,1000")
    g.add_argument("--stage-duration", default="30s")
    g.add_argument("--slo", default="", help="YAML SLOs per language (default: the registry)")
    g.add_argument("--check-slo", action="store_true", help="exit 1 when an SLO fails")
    g.add_argument("--schedule", default="", help="fault schedule (YAML); run by the master, phases tag requests")
    g.add_argument("--fault-journal", default="", help="recovery journal (default: the user's state dir)")
    allow.add_arguments(g)
    g.add_argument("--results-dir", default="", help="write DIR/<run_id>/ results")
    g.add_argument("--requests-sample", type=float, default=1.0, help="fraction of requests in requests.jsonl")
    g.add_argument("--prometheus-port", type=int, default=0, help="serve live metrics (master)")
    g.add_argument("--push-gateway", default="", help="Pushgateway URL (job llmchaos, run_id)")
    g.add_argument("--push-interval", type=float, default=10.0)


def quiet_gc() -> None:
    """Full collections of Locust's large heap pause every stream for 40-60 ms: move what exists
    now out of the collector's reach and collect the young generations less often."""
    gc.freeze()
    gc.set_threshold(10_000, 50, 1_000)


class Harness:
    """The plugin's per-process state, reachable as `environment.llmchaos`."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.collector = Collector({}, 1.0, env.parsed_options.seed)
        self.fault_t0: float | None = None  # the master's schedule start, as a worker hears it
        self._finals: set[str] = set()
        self.configure()
        tokenizer.load()  # not on the first request's clock
        quiet_gc()
        self.watch = SelfWatch()
        self.queues: defaultdict[str, Queue] = defaultdict(Queue)
        self.fault_timeline: list[dict] = []
        self.warmup_until = 0.0
        self._arrivals: gevent.Greenlet | None = None
        # master / single process only
        self.merged: Merged | None = None
        self.generator: dict[str, dict] = {}
        self.run_id, self.run_dir, self.started = "", None, 0.0
        self._records: IO[bytes] | None = None
        self._loops: list[gevent.Greenlet] = []
        self._metrics_server = None

    # -- options ----------------------------------------------------------------------------
    def configure(self) -> None:
        """Read the options; a worker reads them again when the master's first spawn message
        brings the run's own (a worker starts with its defaults)."""
        o = self.o = self.env.parsed_options
        self.adapter = ADAPTERS[o.api]
        self.langs = self._langs()
        self.slos = slo.load(o.slo or None)
        self.profile = self._profile()
        self.open_loop = o.rate > 0 or bool(self.profile and self.profile.stages[0].rate is not None)
        self.warmup_s = duration(o.warmup, "--warmup")
        self.seed, self._rng = o.seed, random.Random(o.seed)
        self.faults = FaultSession(o.schedule, o.fault_journal or None, o.run_time, allow.from_args(o),
                                   prepare_targets=not self.is_worker) if o.schedule else None
        if self.faults is not None and self.fault_t0 is not None:
            self.faults.t0 = self.fault_t0
        self.collector.slos, self.collector.sample_rate = self.slos, o.requests_sample

    def _langs(self) -> list[str]:
        tags = [t.strip() for t in self.o.langs.split(",") if t.strip()] or list(languages.registry())
        for t in tags:
            languages.get(t)
        return tags

    def _profile(self) -> profile.Profile | None:
        o = self.o
        if o.load_profile and o.shape:
            raise UsageError("give --load-profile or --shape, not both", field="--shape")
        if o.load_profile:
            return profile.load(o.load_profile)
        if o.shape:
            try:
                levels = [float(x) for x in o.levels.split(",") if x.strip()]
            except ValueError:
                raise UsageError(f"not numbers: {o.levels!r}", field="--levels") from None
            if not levels or any(v <= 0 for v in levels):
                raise UsageError("give positive levels, e.g. 50,200,500", field="--levels")
            return profile.shape(o.shape, levels, duration(o.stage_duration, "--stage-duration"),
                                 o.rate > 0)
        return None

    def phase(self, unix_time: float) -> str:
        """The phase a request started in: warmup, a fault window's name, or baseline."""
        if unix_time < self.warmup_until:
            return "warmup"
        return self.faults.phase(unix_time) if self.faults else "baseline"

    @property
    def is_master(self) -> bool:
        return isinstance(self.env.runner, MasterRunner)

    @property
    def is_worker(self) -> bool:
        return isinstance(self.env.runner, WorkerRunner)

    # -- requests ---------------------------------------------------------------------------
    def prompt_source(self, lang: str) -> PromptSource | LongContextSource:
        rng = random.Random(self._rng.random())
        if self.o.long_context_tokens > 0:
            return LongContextSource(lang, self.o.long_context_tokens, rng)
        sizes = {s.strip() for s in self.o.prompt_sizes.split(",") if s.strip()} or None
        return PromptSource(lang, rng, sizes)

    def request(self, user) -> None:  # noqa: ANN001 - an LLMUser
        """One measured request; in open loop it waits for this language's next arrival first."""
        intended = self.queues[user.lang].get()[1] if self.open_loop else None
        call = self.adapter.call(self.o.model, user.prompts.next(), user.lang, self.o.max_tokens,
                                 not self.o.no_stream, self.o.lang_in_body, self.o.api_key)
        rid = uuid.uuid4().hex
        call.headers[REQUEST_ID_HEADER] = rid
        now_unix, now_perf = time.time(), time.perf_counter()
        intended = now_unix if intended is None else intended
        rec = RequestRecord(user.lang, self.adapter.name, user.host or "", self.phase(intended), rid,
                            self.open_loop, intended)
        try:
            user.client.run(self.adapter, call, not self.o.no_stream, rec, now_perf - (now_unix - intended))
        finally:
            self.collector.add(rec)
            self._locust_stats(rec)

    def _locust_stats(self, rec: RequestRecord) -> None:
        """TTFT and E2E per language in Locust's own table (and web UI)."""
        fire = self.env.events.request.fire
        if rec.ttft is not None:
            fire(request_type="TTFT", name=rec.lang, response_time=rec.ttft * 1000.0, response_length=0,
                 exception=None, context={})
        if rec.outcome == "cancelled":  # the test stopped it: not the target's failure
            return
        failed = None if rec.outcome == "ok" else Exception(f"{rec.outcome}: {rec.error or ''}"[:200])
        fire(request_type="E2E", name=rec.lang, response_time=(rec.e2e or 0.0) * 1000.0,
             response_length=rec.output_tokens if rec.outcome == "ok" else 0, exception=failed, context={})

    # -- open loop ---------------------------------------------------------------------------
    def plan(self, worker: int = 0, workers: int = 1, t0: float | None = None) -> arrivals.ArrivalPlan:
        weights = tuple(languages.get(t).weight for t in self.langs)
        stages = tuple((s.duration, s.rate) for s in self.profile.stages) if self.profile else ()
        return arrivals.ArrivalPlan(t0 or time.time() + 1.0, self.o.rate, self.o.arrival, self.o.burstiness,
                                    self.seed, tuple(self.langs), weights, None, worker, workers, stages,
                                    bool(self.profile and self.profile.ramp))

    def start_arrivals(self, plan: arrivals.ArrivalPlan) -> None:
        self.stop_arrivals()
        self._arrivals = gevent.spawn(self._dispatch, plan)

    def _dispatch(self, plan: arrivals.ArrivalPlan) -> None:
        for k, due, lang in arrivals.schedule(plan):
            wait = due - time.time()
            if wait > 0:
                gevent.sleep(wait)
            self.queues[lang].put((k, due))

    def stop_arrivals(self) -> None:
        """Stop issuing; arrivals due but never sent count as cancelled, never dropped."""
        if self._arrivals is not None:
            self._arrivals.kill(block=False)
            self._arrivals = None
        for lang, q in self.queues.items():
            while not q.empty():
                _, due = q.get()
                rec = RequestRecord(lang, self.adapter.name, self.env.host or "", self.phase(due), open_loop=True,
                                    intended=due, sent=time.time(), outcome="cancelled",
                                    error="never sent: test stopped")
                self.collector.add(rec)

    # -- master / single process -----------------------------------------------------------------
    def begin(self) -> None:
        self.run_id, self.started = results.new_run_id(), time.time()
        if self.o.results_dir:
            self.run_dir = Path(self.o.results_dir) / self.run_id
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._records = open(self.run_dir / "requests.jsonl", "wb")  # noqa: SIM115
        self.merged = Merged(self._records, local=None if self.is_master else self.collector)
        self.generator = {}
        reg = exporters.registry(self.merged, self.faults.active if self.faults else None)
        if self.o.prometheus_port and self._metrics_server is None:
            self._metrics_server = start_http_server(self.o.prometheus_port, addr="0.0.0.0", registry=reg)
        if self.o.push_gateway:
            self._loops.append(gevent.spawn(self._push_loop, reg))
        if not self.is_master:
            self._loops.append(gevent.spawn(self._local_merge_loop))

    def absorb(self, name: str, data: dict) -> None:
        """A worker's report (the master's merge)."""
        assert self.merged is not None
        self.merged.merge(data["collector"])
        self._watch_samples(name, data["watch"])

    def final(self, name: str, data: dict) -> None:
        """A worker's last data, sent on the master's flush."""
        if self.merged is not None:
            self.absorb(name, data)
        self._finals.add(name)

    def collect_finals(self) -> None:
        """Ask every worker for its last data and wait for it (the master's test_stop)."""
        clients = [c.id for c in self.env.runner.clients.values()]
        self._finals = set()
        for cid in clients:
            self.env.runner.send_message(FLUSH_MSG, None, client_id=cid)
        deadline = time.monotonic() + FINAL_WAIT_S
        while not self._finals >= set(clients) and time.monotonic() < deadline:
            gevent.sleep(0.05)
        if missing := set(clients) - self._finals:
            log.warning("no final data from %d worker(s) in %.0fs: %s", len(missing), FINAL_WAIT_S, sorted(missing))

    def _watch_samples(self, name: str, samples: dict) -> None:
        g = self.generator.setdefault(name, {"cpu": [], "lags": []})
        g["cpu"] += samples["cpu"]
        g["lags"] += samples["lags"]

    def _local_merge_loop(self) -> None:
        """A single process shares its collector with the totals; only records need writing out."""
        while True:
            gevent.sleep(1.0)
            self._flush_local()

    def _flush_local(self) -> None:
        assert self.merged is not None
        self.merged.write_records(self.collector.take_records())
        self._watch_samples("local", self.watch.drain())

    def _push_loop(self, reg) -> None:  # noqa: ANN001
        while True:
            gevent.sleep(self.o.push_interval)
            exporters.push(self.o.push_gateway, reg, self.run_id)

    def finish(self) -> None:
        """Write results, push the last time, print the summary, set the exit code."""
        if self.merged is None:
            return
        for g in self._loops:
            g.kill(block=False)
        self._loops = []
        if not self.is_master:
            self._flush_local()
        ended = time.time()
        gen = verdict(self.generator)
        slo_rows = slo.evaluate(self.slos, self.merged.hist, self.merged.slo_counts, ended - self.started)
        if self.o.push_gateway:
            exporters.push(self.o.push_gateway, exporters.registry(self.merged), self.run_id)
        if self.run_dir is not None:
            assert self._records is not None
            self._records.close()
            results.write(self.run_dir, self._run_json(ended, gen, slo_rows), self.merged.hist)
        self._print_summary(gen, slo_rows)
        if self.o.check_slo and not all(r["pass"] for r in slo_rows):
            self.env.process_exit_code = 1
        self.merged = None

    def _run_json(self, ended: float, gen: dict, slo_rows: list[dict]) -> dict:
        o, merged = self.o, self.merged
        assert merged is not None
        options = {k: v for k, v in vars(o).items() if isinstance(v, (str, int, float, bool, list, type(None)))
                   and k not in ("api_key",)}
        return {
            "run_id": self.run_id, "start": results.iso(self.started), "end": results.iso(ended),
            "duration_s": round(ended - self.started, 3), "command": sys.argv, "config": options,
            "targets": [self.env.host], "api": o.api,
            "load_profile": {"mode": "open" if self.open_loop else "closed", "rate": o.rate, "arrival": o.arrival,
                             "burstiness": o.burstiness, "users": o.num_users, "spawn_rate": o.spawn_rate,
                             "stages": [vars(s) for s in self.profile.stages] if self.profile else None},
            "seeds": {"seed": self.seed}, "host": results.host_info(),
            "generator": gen["processes"],
            "validity": {"valid": not gen["flags"], "flags": gen["flags"]},
            "faults": self.fault_timeline,
            "outcomes": [dict(zip(("target", "lang", "api", "phase", "outcome", "count"), (*k, n)))
                         for k, n in sorted(merged.outcomes.items())],
            "slo": slo_rows,
            "requests": {"file": "requests.jsonl", "sample_rate": o.requests_sample,
                         "written": merged.records_written},
        }

    def _print_summary(self, gen: dict, slo_rows: list[dict]) -> None:
        assert self.merged is not None
        h, lines = self.merged.hist, []
        lines.append(f"llmchaos run {self.run_id}" + (f" -> {self.run_dir}" if self.run_dir else ""))
        lines.append(f"{'lang':5} {'reqs':>6} {'ok%':>6} {'ttft p50':>9} {'ttft p99':>9} {'itl p50':>8} "
                     f"{'itl p99':>8} {'e2e p99':>8} {'tok/req':>7} {'slo':>5}")
        for row in slo_rows:
            sel = {"target": row["target"], "lang": row["lang"], "api": row["api"]}
            ok = sum(n for k, n in self.merged.outcomes.items() if k[1] == row["lang"] and k[4] == "ok")
            ttft, itl, e2e, toks = (h.combined(m, **sel) for m in ("ttft", "itl", "e2e", "output_tokens"))

            def ms(x, p: float) -> str:  # noqa: ANN001
                return f"{x.quantile(p) * 1000:.1f}" if x is not None and x.count else "-"
            lines.append(f"{row['lang']:5} {row['issued']:6d} {100 * ok / max(row['issued'], 1):6.1f} "
                         f"{ms(ttft, 50):>9} {ms(ttft, 99):>9} {ms(itl, 50):>8} {ms(itl, 99):>8} "
                         f"{ms(e2e, 99):>8} {toks.sum / toks.count if toks and toks.count else 0:7.1f} "
                         f"{'pass' if row['pass'] else 'FAIL':>5}")
        if gen["flags"]:
            lines.append("INVALID RUN: the load generator saturated (" + ", ".join(gen["flags"]) +
                         "); its own queueing is in these latencies")
        print("\n".join(lines), file=sys.stderr)


def install() -> None:
    """Register the plugin with Locust's events (called by the locustfile)."""
    # A worker handling a spawn message rebuilds Locust's whole argument parser once per option
    # (~0.3 s with every stream in flight stalled); its result never changes, so build it once.
    argument_parser.default_args_dict = functools.cache(argument_parser.default_args_dict)
    events.init_command_line_parser.add_listener(add_arguments)

    @events.init.add_listener
    def _(environment: Environment, **kw: object) -> None:
        try:
            h = Harness(environment)
        except UsageError as e:
            print(f"llmchaos: error: {e}", file=sys.stderr)
            sys.exit(2)
        environment.llmchaos = h
        tags = set(environment.parsed_options.tags or []) & set(languages.registry())
        keep = [c for c in environment.user_classes if getattr(c, "lang", None) in h.langs
                and (not tags or c.lang in tags)]
        if keep:
            environment.user_classes[:] = keep
        runner = environment.runner
        if isinstance(runner, WorkerRunner):
            runner.register_message(ARRIVALS_MSG, lambda environment, msg, **_: h.start_arrivals(
                arrivals.ArrivalPlan(**{**msg.data, "langs": tuple(msg.data["langs"]),
                                        "weights": tuple(msg.data["weights"]),
                                        "stages": tuple(map(tuple, msg.data["stages"]))})))

            def fault_clock(environment: Environment, msg, **_: object) -> None:  # noqa: ANN001
                h.fault_t0 = msg.data["t0"]  # before the spawn message brings the schedule option
                if h.faults is not None:
                    h.faults.t0 = h.fault_t0

            runner.register_message(FAULTS_MSG, fault_clock)

            def flush(environment: Environment, msg, **_: object) -> None:  # noqa: ANN001
                """Stop now and hand over everything, cancelled requests included, while the master
                still listens (after its quit it waits only 0.5 s for a last report)."""
                runner.stop()
                runner.send_message(FINAL_MSG, {"collector": h.collector.report(streaming=False),
                                                "watch": h.watch.drain()})

            runner.register_message(FLUSH_MSG, flush)
        elif isinstance(runner, MasterRunner):
            runner.register_message(FINAL_MSG, lambda environment, msg, **_: h.final(msg.node_id, msg.data))

        def report(client_id: str, data: dict, **kw: object) -> None:
            data["llmchaos"] = {"collector": h.collector.report(streaming=runner.user_count > 0),
                                "watch": h.watch.drain()}

        def absorb(client_id: str, data: dict, **kw: object) -> None:
            if h.merged is not None and "llmchaos" in data:
                h.absorb(client_id, data["llmchaos"])

        environment.events.report_to_master.add_listener(report)
        environment.events.worker_report.add_listener(absorb)

    @events.test_start.add_listener
    def _(environment: Environment, **kw: object) -> None:
        h: Harness = environment.llmchaos
        if h.is_worker:
            h.configure()
        h.warmup_until = time.time() + h.warmup_s
        h.watch.start()
        if h.is_worker:
            return
        h.begin()
        if h.faults:
            t0 = time.time() + 0.5
            h.faults.start(t0)
            if h.is_master:
                for client in environment.runner.clients.values():
                    environment.runner.send_message(FAULTS_MSG, {"t0": t0}, client_id=client.id)
        if h.open_loop:
            if h.is_master:
                clients = sorted(c.id for c in environment.runner.clients.values())
                t0 = time.time() + 1.0
                for i, cid in enumerate(clients):
                    plan = h.plan(i, len(clients), t0)
                    environment.runner.send_message(ARRIVALS_MSG, vars(plan), client_id=cid)
            else:
                h.start_arrivals(h.plan())

    @events.spawning_complete.add_listener
    def _(user_count: int, **kw: object) -> None:
        quiet_gc()  # the users and their clients live until the end

    @events.test_stop.add_listener
    def _(environment: Environment, **kw: object) -> None:
        h: Harness = environment.llmchaos
        h.stop_arrivals()
        if h.faults and not h.is_worker:
            h.fault_timeline = h.faults.stop()  # faults end with the test, before anything else
        if h.is_master:
            h.collect_finals()

    @events.quitting.add_listener
    def _(environment: Environment, **kw: object) -> None:
        h: Harness | None = getattr(environment, "llmchaos", None)
        if h is not None and not h.is_worker:
            h.finish()
