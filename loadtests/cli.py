"""The load tests' subcommands of `llmchaos`: `push-delete` removes a run's group from a Pushgateway
(the exporters push it); `loadtest-help` lists the locustfiles' own options (Locust prints its
`--help` before it loads a locustfile, so without them). `logs` is `loadtests/logs/cli.py`."""

from __future__ import annotations

import argparse

from llmchaos.cli import Subparsers
from llmchaos.errors import UsageError


def register_push_delete(sub: Subparsers) -> None:
    p = sub.add_parser("push-delete", help="delete a run's group from a Pushgateway")
    p.add_argument("--gateway", required=True, help="Pushgateway URL")
    p.add_argument("--run-id", required=True)
    p.add_argument("--job", default="llmchaos")
    p.set_defaults(func=run_push_delete)


def register_loadtest_help(sub: Subparsers) -> None:
    h = sub.add_parser("loadtest-help", help="the options of locust -f loadtests/locustfile.py besides Locust's")
    h.add_argument("--replay", action="store_true", help="those of locust -f loadtests/replay/locustfile.py instead")
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

    name = "replay/locustfile.py --log FILE --target-a URL" if args.replay else "locustfile.py --host URL"
    parser = ArgumentParser(
        prog=f"locust -f loadtests/{name.split()[0]}",
        usage=f"locust -f loadtests/{name} [Locust's options: locust --help] [these options]",
        add_help=False,
    )
    if args.replay:
        from loadtests.replay.settings import add_replay_arguments

        add_replay_arguments(parser)
    else:
        add_arguments(parser)
    parser.print_help()
