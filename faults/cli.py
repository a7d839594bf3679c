"""`llmchaos proxy` (the SSE chaos proxy) and `llmchaos faults run|probe|recover|host`."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from datetime import UTC, datetime

from faults import allow
from llmchaos.cli import Subparsers, positive
from llmchaos.errors import UsageError
from llmchaos.units import YEAR_S

START_LEAD_S = 0.5  # a run starts this long after the command, so the first window is on time
STOP_S = 1.0  # on SIGINT/SIGTERM, what is still applied is reverted within this (else left in the journal)
END_S = 10.0  # at the end, the last reverts get this long


def register(sub: Subparsers) -> None:
    from faults.proxy.wire import HEAD_TIMEOUT_S

    p = sub.add_parser("proxy", help="run the SSE chaos proxy in front of an upstream")
    p.add_argument("--listen", default="127.0.0.1:9100", help="HOST:PORT or [IPv6]:PORT")
    p.add_argument("--upstream", required=True, help="base URL of the server to forward to")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--control-listen",
        default=None,
        help="HOST:PORT where the control API alone is answered, from any peer (fence it: a NetworkPolicy)",
    )
    p.add_argument(
        "--header-timeout",
        type=positive(float),
        default=HEAD_TIMEOUT_S,
        help="seconds a request head may take from its first byte before 408 and close (slowloris)",
    )
    p.set_defaults(func=run_proxy)

    p = sub.add_parser("faults", help="run, probe or recover fault schedules")
    fsub = p.add_subparsers(dest="faults_command", required=True)
    run = fsub.add_parser("run", help="run a schedule from now")
    run.add_argument("schedule")
    run.add_argument("--dry-run", action="store_true", help="print the plan with absolute times")
    run.add_argument(
        "--duration",
        type=positive(float, most=YEAR_S),
        default=None,
        help="seconds to run (default: until the last window ends; needed with 'every')",
    )
    run.add_argument("--journal", default=None)
    run.add_argument("--timeline", default=None, help="write the windows as they ran (JSON)")
    allow.add_arguments(run)
    run.set_defaults(func=run_faults)
    rec = fsub.add_parser("recover", help="revert whatever the journal still holds")
    rec.add_argument("--journal", default=None)
    rec.set_defaults(func=run_recover)
    probe = fsub.add_parser("probe", help="what this host can inject; with a schedule, whether each target can")
    probe.add_argument("schedule", nargs="?")
    allow.add_arguments(probe)
    probe.set_defaults(func=run_probe)
    from faults.host.command import add_parser

    add_parser(fsub)


def run_proxy(args: argparse.Namespace) -> None:
    from faults.proxy.server import serve

    # a bad address: UsageError, before it listens
    serve(args.listen, args.upstream, args.seed, args.header_timeout, args.control_listen)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def run_faults(args: argparse.Namespace) -> int:
    from faults import schedule
    from faults.injectors import KINDS
    from faults.session import FaultSession

    plan = schedule.load(args.schedule, KINDS)
    if remote := [f for f in plan.faults if f.host]:
        raise UsageError(
            f"runs on fault host {remote[0].host!r}: a Locust master leases it there (--schedule), not `faults run`",
            file=args.schedule,
            line=remote[0].target_line,
            field=f"faults[{remote[0].index}].target.host",
        )
    if any(f.every for f in plan.faults) and args.duration is None:
        raise UsageError("a schedule with 'every' needs --duration", field="--duration")
    horizon = args.duration or plan.end()
    if args.dry_run:
        t0 = time.time() + START_LEAD_S
        print(f"seed {plan.seed}; {plan.count(horizon)} windows from {_iso(t0)}")
        for w in plan.windows(horizon):
            print(
                f"{_iso(t0 + w.start)} -> {_iso(t0 + w.end)}  {w.name:16} {w.kind:9} {json.dumps(w.target)} "
                f"{json.dumps(w.params)}"
            )
        return 0
    session = FaultSession(args.schedule, args.journal, horizon, allow.from_args(args))
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    session.start(time.time() + START_LEAD_S)
    while not stopping and session.running():  # every window that fell due has run (late ones too)
        time.sleep(0.05)
    timeline, _ = session.stop(timeout=STOP_S if stopping else END_S)  # fault hosts join a Locust master
    if args.timeline:
        with open(args.timeline, "w", encoding="utf-8") as f:
            json.dump([w.to_json() for w in timeline], f, indent=1)
    for line in session.errors():
        print(f"llmchaos: {line}", file=sys.stderr)
    return 1 if session.errors() else 0


def run_recover(args: argparse.Namespace) -> int:
    from faults.journal import DEFAULT, Journal
    from faults.recover import recover

    lines = recover(Journal(args.journal or DEFAULT))
    print("\n".join(lines) if lines else "nothing to recover")
    return 1 if any(line.startswith("could not") for line in lines) else 0


def run_probe(args: argparse.Namespace) -> int:
    from faults import schedule
    from faults.injectors import KINDS
    from faults.injectors.base import FieldError

    width = max(map(len, KINDS))  # the longest kind's name aligns the column
    if args.schedule is None:
        for kind, injector in KINDS.items():
            reason = injector.probe_host()
            print(f"{kind:{width}} {'yes' if reason is None else 'no: ' + reason}")
        return 0
    plan = schedule.load(args.schedule, KINDS)
    allowed = allow.from_args(args)
    bad = 0
    for spec in plan.faults:
        if spec.host:
            print(f"{spec.name:16} {spec.kind:{width}} on fault host {spec.host}: the master probes it there")
            continue
        try:
            reason = KINDS[spec.kind](spec.target, allowed).probe(spec.applied_params)
        except FieldError as e:
            reason = str(e)
        bad += reason is not None
        print(f"{spec.name:16} {spec.kind:{width}} {'ok' if reason is None else 'NO: ' + reason}")
    return 1 if bad else 0
