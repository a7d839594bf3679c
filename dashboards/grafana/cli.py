"""`llmchaos dashboards build [--out DIR] [--check]`: write the generated Grafana dashboards, or
exit 1 when the committed ones are stale; a query on a metric no code defines fails either way."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llmchaos.cli import Subparsers


def register(sub: Subparsers) -> None:
    d = sub.add_parser("dashboards", help="the generated Grafana dashboards")
    verbs = d.add_subparsers(dest="dashboards_command", required=True, metavar="VERB")
    b = verbs.add_parser("build", help="write the dashboards' JSON (load, A/B, server)")
    b.add_argument("--out", type=Path, default=None, help="directory (default: dashboards/grafana/json)")
    b.add_argument("--check", action="store_true", help="write nothing; exit 1 when the files there are stale")
    b.set_defaults(func=run_build)


def run_build(args: argparse.Namespace) -> int:
    from dashboards.grafana import build

    out = args.out or build.OUT
    try:
        files = build.rendered()
    except build.BuildError as e:
        print(f"llmchaos dashboards build: a query reads a metric no code defines:\n{e}", file=sys.stderr)
        return 1
    if args.check:
        if old := build.stale(out, files):
            print(
                f"llmchaos dashboards build --check: stale: {', '.join(old)}; run `llmchaos dashboards build`",
                file=sys.stderr,
            )
            return 1
        return 0
    for path in build.write(out, files):
        print(path)
    return 0
