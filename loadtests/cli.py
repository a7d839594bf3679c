"""`llmchaos push-delete`: remove a run's group from a Pushgateway (the exporters push it)."""

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


def run_push_delete(args: argparse.Namespace) -> None:
    from prometheus_client import delete_from_gateway

    try:
        delete_from_gateway(args.gateway, job=args.job, grouping_key={"run_id": args.run_id}, timeout=10)
    except OSError as e:
        raise UsageError(f"cannot delete from {args.gateway}: {e}", field="--gateway") from None
