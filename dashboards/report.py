"""`llmchaos report RUN [--md] [--html FILE]`: a run's report, read back through the core's run model:
its summary as text (`formats.run_summary`: the per-language table, the fault windows as they ran,
the guard's trips, the recovery), or as Markdown (`formats.run_markdown`), and, with `--html`, the
self-contained report a person reads (`formats.run_page`). They are imported when the command runs,
not when its parser is built."""

from __future__ import annotations

import argparse
from pathlib import Path

from llmchaos.cli import Subparsers
from llmchaos.errors import UsageError


def register(sub: Subparsers) -> None:
    p = sub.add_parser("report", help="a results directory's per-language summary (and an HTML report)")
    p.add_argument("run", help="a results directory, DIR/<run_id>")
    p.add_argument("--md", action="store_true", help="Markdown (for a CI comment) instead of the text summary")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report of the run")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    if args.md:
        from dashboards.formats.run_markdown import render
        from llmchaos import run

        print(render(run.load(args.run)))
    else:
        from dashboards.formats.run_summary import summary

        print(summary(args.run))
    if args.html:
        write_html(args.run, args.html)
    return 0


def write_html(run_dir: str | Path, path: str | Path) -> None:
    from dashboards.comparison import runs
    from dashboards.formats.run_page import run_report

    content = run_report(runs.load(Path(run_dir)))
    try:
        Path(path).write_text(content, encoding="utf-8")
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=str(path), field="--html") from None
