"""Wires llmchaos into Locust's events: at init a harness for the process (with the locustfile's kind
of source), then each event of the test's life forwarded to it. The messages between master and
workers are `protocol`'s; what happens at each event is the harness's.
"""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable

import gevent
from locust import argument_parser, events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from llmchaos import languages
from llmchaos.errors import UsageError
from loadtests import dataplane, webui
from loadtests.harness import Harness, SourceType, harness, quiet_gc
from loadtests.options import add_arguments, parsed_options
from loadtests.sources import Loop


def on_init(environment: Environment, source_type: SourceType = Loop, **kw: object) -> None:
    try:
        dataplane.asked()
        h = Harness(environment, source_type)
    except UsageError as e:
        print(f"llmchaos: error: {e}", file=sys.stderr)
        if isinstance(environment.runner, MasterRunner):  # its workers quit now, not at a heartbeat timeout
            environment.runner.quit()
        sys.exit(2)
    if environment.web_ui is not None:
        webui.install(environment, h)  # the master's or a single process's UI: the llmchaos tabs
    tags = set(parsed_options(environment).tags or []) & set(languages.registry())
    keep = [
        c
        for c in environment.user_classes
        if (lang := getattr(c, "lang", None)) is None or (lang in h.settings.langs and (not tags or lang in tags))
    ]
    if keep:
        environment.user_classes[:] = keep
    if not isinstance(environment.runner, WorkerRunner) and parsed_options(environment).headless:
        _sigterm_as_sigint(h)


def _sigterm_as_sigint(h: Harness) -> None:
    """Until the test stops, SIGTERM interrupts the run as Ctrl-C does: the test stops, faults are
    reverted, the results written. (A headless Locust with a load shape, and our locustfile always
    has one, installs its own SIGTERM handler only once the shape has ended: until then SIGTERM
    killed the process with nothing written and the faults left on.)"""
    main = gevent.getcurrent()  # the init event runs in the main greenlet, where Locust waits on the shape

    def interrupt() -> None:
        if not h.stopping.is_set():
            main.throw(KeyboardInterrupt)

    gevent.signal_handler(signal.SIGTERM, interrupt)
    # Ctrl-C to the main greenlet too: Python's own handler raised it in whichever greenlet the signal
    # found running (a user's, or the hub's), where it could end without stopping the test
    gevent.signal_handler(signal.SIGINT, lambda: main.throw(KeyboardInterrupt))


def on_test_stopping(environment: Environment, **kw: object) -> None:
    """Before Locust stops the users: what they had in flight is cancelled at stop."""
    harness(environment).stop_begins()


def on_quitting(environment: Environment, **kw: object) -> None:
    try:
        h = harness(environment)
    except KeyError:  # init refused the options: nothing ran
        return
    if not h.is_worker:
        h.finish()


def install(source_type: SourceType = Loop, arguments: Callable[..., None] = add_arguments) -> None:
    """Register the plugin with Locust's events (called by a locustfile, with its kind of source
    and its options: the load test's closed or open loop, the replay's log)."""
    # A worker handling a spawn message rebuilds Locust's whole argument parser once per option
    # (~0.3 s with every stream in flight stalled); its result never changes, so build it once.
    argument_parser.default_args_dict = functools.cache(argument_parser.default_args_dict)
    events.init_command_line_parser.add_listener(arguments)
    events.init.add_listener(functools.partial(on_init, source_type=source_type))
    events.test_start.add_listener(lambda environment, **_: harness(environment).start())
    events.spawning_complete.add_listener(lambda **_: quiet_gc())  # the users and their clients live until the end
    events.test_stopping.add_listener(on_test_stopping)
    events.test_stop.add_listener(lambda environment, **_: harness(environment).stop())
    events.quitting.add_listener(on_quitting)
