"""The load tests' subcommands of `llmchaos`: `push-delete` removes a run's group from a Pushgateway
(the exporters push it); `loadtest-help` lists the locustfile's own options (Locust prints its
`--help` before it loads a locustfile, so without them)."""

from __future__ import annotations

import argparse

from llmchaos.cli import Subparsers
from llmchaos.errors import UsageError


def register(sub: Subparsers) -> None:
    p = sub.add_parser("push-delete", help="delete a run's group from a Pushgateway")
    p.add_argument("--gateway", required=True, help="Pushgateway URL")
    p.add_argument("--run-id", required=True)
    p.add_argument("--job", default="llmchaos")
    p.set_defaults(func=run_push_delete)
    h = sub.add_parser("loadtest-help", help="the options of locust -f loadtests/locustfile.py besides Locust's")
    h.set_defaults(func=run_loadtest_help)


def run_push_delete(args: argparse.Namespace) -> None:
    from prometheus_client import delete_from_gateway

    try:
        delete_from_gateway(args.gateway, job=args.job, grouping_key={"run_id": args.run_id}, timeout=10)
    except OSError as e:
        raise UsageError(f"cannot delete from {args.gateway}: {e}", field="--gateway") from None


def run_loadtest_help(args: argparse.Namespace) -> None:
    from configargparse import ArgumentParser

    from loadtests.options import add_arguments

    parser = ArgumentParser(
        prog="locust -f loadtests/locustfile.py",
        usage="%(prog)s --host URL [Locust's options: locust --help] [these options]",
        add_help=False,
    )
    add_arguments(parser)
    parser.print_help()
