"""Wires llmchaos into Locust's events and messages.

Every process measures into its harness's collector; workers ship it with Locust's
`report_to_master` and the master merges it (HDR histograms add exactly). The master (or the
single process) runs the fault schedule and the open-loop plan from test start, collects the
workers' last data at test stop, and writes the results when Locust quits.
"""

from __future__ import annotations

import functools
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent
from locust import argument_parser, events
from locust.env import Environment
from locust.rpc import Message
from locust.runners import MasterRunner, WorkerRunner

from llmchaos import languages
from llmchaos.errors import UsageError
from loadtests import webui
from loadtests.harness import Harness, quiet_gc
from loadtests.merge import FINAL_MSG, FLUSH_MSG
from loadtests.options import add_arguments, parsed_options
from loadtests.users import LLMUser

ARRIVALS_MSG = "llmchaos_arrivals"
FAULTS_MSG = "llmchaos_faults"
FAULTS_LEAD_S, ARRIVALS_LEAD_S = 0.5, 1.0  # the schedule and the open-loop plan start this long after test start


def harness(environment: Environment) -> Harness:
    """The harness on_init put on the environment."""
    h: Harness = environment.llmchaos  # type: ignore[attr-defined]  # Locust's Environment has no slot for plugins
    return h


def on_init(environment: Environment, harness_type: type[Harness] = Harness, **kw: object) -> None:
    try:
        h = harness_type(environment)
    except UsageError as e:
        print(f"llmchaos: error: {e}", file=sys.stderr)
        sys.exit(2)
    environment.llmchaos = h  # type: ignore[attr-defined]  # Locust's Environment has no slot for plugins
    if environment.web_ui is not None:
        webui.install(environment, h)  # the master's or a single process's UI: the llmchaos tabs
    tags = set(parsed_options(environment).tags or []) & set(languages.registry())
    keep = [
        c
        for c in environment.user_classes
        if issubclass(c, LLMUser) and c.lang in h.settings.langs and (not tags or c.lang in tags)
    ]
    if keep:
        environment.user_classes[:] = keep
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        _worker_messages(runner, h)
    elif isinstance(runner, MasterRunner):
        runner.register_message(FINAL_MSG, lambda msg, **_: _final(h, msg))
    if not isinstance(runner, WorkerRunner) and parsed_options(environment).headless:
        _sigterm_as_sigint(h)

    def report(client_id: str, data: dict[str, Any], **kw: object) -> None:
        data["llmchaos"] = h.report_data(streaming=runner is not None and runner.user_count > 0)

    def absorb(client_id: str, data: dict[str, Any], **kw: object) -> None:
        if "llmchaos" in data:
            h.absorb(client_id, data["llmchaos"])

    environment.events.report_to_master.add_listener(report)
    environment.events.worker_report.add_listener(absorb)


def _sigterm_as_sigint(h: Harness) -> None:
    """Until the test stops, SIGTERM interrupts the run as Ctrl-C does: the test stops, faults are
    reverted, the results written. (A headless Locust with a load shape, and our locustfile always
    has one, installs its own SIGTERM handler only once the shape has ended: until then SIGTERM
    killed the process with nothing written and the faults left on.)"""
    main = gevent.getcurrent()  # the init event runs in the main greenlet, where Locust waits on the shape

    def interrupt() -> None:
        if not h.stopping:
            main.throw(KeyboardInterrupt)

    gevent.signal_handler(signal.SIGTERM, interrupt)


def _final(h: Harness, msg: Message) -> None:
    """A worker's last data, sent when the master asked for it at test stop."""
    h.absorb(msg.node_id, msg.data)
    h.finals.received.add(msg.node_id)


def _worker_messages(runner: WorkerRunner, h: Harness) -> None:
    runner.register_message(ARRIVALS_MSG, lambda msg, **_: h.start_arrivals(msg.data))

    def fault_clock(msg: Message, **_: object) -> None:
        h.fault_t0 = msg.data["t0"]  # may come before the spawn message brings the schedule option
        if h.faults is not None:
            h.faults.t0 = h.fault_t0

    def flush(msg: Message, **_: object) -> None:
        """Stop now and hand over everything, cancelled requests included, while the master still
        listens (after its quit it waits only 0.5 s for a last report)."""
        runner.stop()
        runner.send_message(FINAL_MSG, h.report_data(streaming=False))

    runner.register_message(FAULTS_MSG, fault_clock)
    runner.register_message(FLUSH_MSG, flush)


def on_test_start(environment: Environment, **kw: object) -> None:
    h = harness(environment)
    if h.is_worker:
        h.configure()
    h.warmup_until, h.stopping = time.time() + h.settings.warmup_s, False
    h.watch.start()
    if h.is_worker:
        return
    h.begin()
    runner = environment.runner
    fault_t0 = h.faults.start(time.time() + FAULTS_LEAD_S) if h.faults else None
    arrivals_t0 = time.time() + ARRIVALS_LEAD_S
    if isinstance(runner, MasterRunner):
        clients = sorted(c.id for c in runner.clients.values())
        for i, cid in enumerate(clients):
            if fault_t0 is not None:
                runner.send_message(FAULTS_MSG, {"t0": fault_t0}, client_id=cid)
            if (plan := h.arrival_plan(arrivals_t0, i, len(clients))) is not None:
                runner.send_message(ARRIVALS_MSG, plan, client_id=cid)
    elif (plan := h.arrival_plan(arrivals_t0)) is not None:
        h.start_arrivals(plan)


def on_test_stopping(environment: Environment, **kw: object) -> None:
    """Before Locust stops the users: what they had in flight is cancelled at stop."""
    harness(environment).stopping = True


def on_test_stop(environment: Environment, **kw: object) -> None:
    h = harness(environment)
    h.stop_arrivals()
    if h.faults and not h.is_worker:
        h.fault_timeline = h.faults.stop()  # faults end with the test, before anything else
    if isinstance(environment.runner, MasterRunner):
        h.finals.collect(environment.runner)


def on_quitting(environment: Environment, **kw: object) -> None:
    h: Harness | None = getattr(environment, "llmchaos", None)
    if h is not None and not h.is_worker:
        h.finish()


def install(harness_type: type[Harness] = Harness, arguments: Callable[..., None] = add_arguments) -> None:
    """Register the plugin with Locust's events (called by the locustfile, which may bring its own
    kind of harness and options: the replay's)."""
    # A worker handling a spawn message rebuilds Locust's whole argument parser once per option
    # (~0.3 s with every stream in flight stalled); its result never changes, so build it once.
    argument_parser.default_args_dict = functools.cache(argument_parser.default_args_dict)
    events.init_command_line_parser.add_listener(arguments)
    events.init.add_listener(functools.partial(on_init, harness_type=harness_type))
    events.test_start.add_listener(on_test_start)
    events.spawning_complete.add_listener(lambda **_: quiet_gc())  # the users and their clients live until the end
    events.test_stopping.add_listener(on_test_stopping)
    events.test_stop.add_listener(on_test_stop)
    events.quitting.add_listener(on_quitting)
