"""`llmchaos report RUN`: a results directory's per-language summary."""

from __future__ import annotations

import argparse

from llmchaos.cli import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("report", help="print a results directory's per-language summary")
    p.add_argument("run", help="a results directory, DIR/<run_id>")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from dashboards.report import summary

    print(summary(args.run))
    return 0
