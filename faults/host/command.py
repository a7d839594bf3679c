"""`llmchaos faults host`: run this machine's fault host, joined to a Locust master's port.

Its parser needs `reach` (what the host may touch) and the secret's variable alone; the agent, the
applier (and through it every injector) and the journal are imported when the host runs."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from faults.allow import is_name
from faults.host import reach
from faults.host.seal import SECRET_ENV, read_secret
from llmchaos.cli import positive
from llmchaos.errors import UsageError

MAX_LEASE_S = 10.0  # a master may hold a fault at most this long without renewing it


def add_parser(fsub: argparse._SubParsersAction) -> None:
    p = fsub.add_parser(
        "host",
        help="run this machine's fault host: join a Locust master, apply the windows it leases here",
        description=f"The secret comes from --secret-file or {SECRET_ENV}, never from the command line. "
        "Deny by default: a kind works here only once an --allow-* option names what it may touch "
        "(qdiscs: --allow-interface or --allow-netns; clocks: --allow-gpu or --allow-sim; --allow-proxy; "
        "--allow-docker), whatever a master asks; 'default: any' below means any within that.",
    )
    p.add_argument("--master-host", required=True, help="the Locust master's address (as its workers use)")
    p.add_argument("--master-port", type=int, default=5557, help="the master's port (--master-bind-port)")
    p.add_argument("--name", required=True, help="this host's name, as schedules write it (target.host)")
    p.add_argument("--secret-file", default=None, help=f"the shared secret's file (else {SECRET_ENV})")
    p.add_argument("--journal", default=None, help="recovery journal (default: the user's state dir)")
    p.add_argument(
        "--max-lease",
        type=positive(float),
        default=MAX_LEASE_S,
        help="seconds a fault stays applied without a renewal, whatever the master asks",
    )
    p.add_argument(
        "--max-lateness",
        type=positive(float),
        default=1.0,
        help="a lease this much later than the quickest (queued on a cut link) renews nothing",
    )
    reach.add_arguments(p)
    p.set_defaults(func=run_host)


def run_host(args: argparse.Namespace) -> int:
    import logging

    from faults.host.agent import Agent, hello_summary
    from faults.host.applier import Applier
    from faults.host.meter import Meter
    from faults.injectors import admin
    from faults.journal import DEFAULT, LEFT, Journal

    if not is_name(args.name):
        raise UsageError(f"must be one word, got {args.name!r}", field="--name")
    if not 0 < args.master_port < 65536:
        raise UsageError(f"not a port: {args.master_port}", field="--master-port")
    try:
        secret = read_secret(args.secret_file, "the fault host's secret")
    except ValueError as e:
        raise UsageError(str(e), field="--secret-file") from None
    allowed = reach.from_args(args)
    journal = Journal(args.journal or DEFAULT)
    journal.check_writable()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    admin.quiet()
    applier = Applier(allowed, journal, args.max_lease)
    for line in applier.sweep():
        print(f"llmchaos faults host: {line}", file=sys.stderr)
    host = f"[{args.master_host}]" if ":" in args.master_host else args.master_host
    meter = Meter()
    agent = Agent(f"{host}:{args.master_port}", args.name, secret, applier, args.max_lateness, meter)
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    print(
        f"llmchaos faults host {args.name}: joining {host}:{args.master_port}; "
        f"may touch {hello_summary(allowed.declare())}; "
        + (f"energy of {len(meter.gpus)} GPU(s)" if meter.nv is not None else f"no energy ({meter.why})"),
        file=sys.stderr,
        flush=True,
    )
    agent.run(stopping)
    left = [e["name"] for e in journal.entries() if e.get("lease")]
    if left:
        print(f"llmchaos faults host: {', '.join(left)}: {LEFT}", file=sys.stderr)
    return 1 if left else 0
