"""A comparison written out as `compare` and `regress` are asked: the table, Markdown or JSON on
standard output, and JUnit XML and HTML files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dashboards.comparison.verdicts import Comparison
from dashboards.formats import html, junit, markdown, terminal
from dashboards.formats import json as json_format
from dashboards.formats.html import Context
from llmchaos.errors import UsageError


def emit(
    result: Comparison,
    args: argparse.Namespace,
    context: Context,
    title: str = "llmchaos compare",
    notes: dict[str, list[str]] | None = None,
) -> int:
    """Print the comparison as asked (with `notes` after it, each kind of line under its JSON key:
    the recovery of each fault window, the history's change points) and write its files; its exit
    status."""
    notes = notes or {}
    lines = [line for kind in notes.values() for line in kind]
    if args.json:
        print(json_format.render(result, notes))
    elif args.md:
        print(markdown.render(result) + "".join(f"\n- {markdown.escape(line)}" for line in lines))
    else:
        print(terminal.render(result, terminal.use_colour(sys.stdout, args.color)) + "".join(f"\n{x}" for x in lines))
    if args.junit:
        _write(args.junit, junit.render(result, title), "--junit")
    if args.html:
        _write(args.html, html.comparison(result, context, title), "--html")
    return result.exit_code


def _write(path: str, content: str, flag: str) -> None:
    try:
        Path(path).write_text(content, encoding="utf-8")
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=path, field=flag) from None
