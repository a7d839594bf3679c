"""What `llmchaos compare` and `llmchaos regress` do: read both sides, compare them, write every
output asked for; the exit status is the comparison's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dashboards import history as hist
from dashboards import options, prometheus, runs
from dashboards import rules as regress_rules
from dashboards.compare import Comparison, Gate
from dashboards.compare import compare as compare_sides
from dashboards.formats import html, junit, markdown, terminal
from dashboards.formats import json as json_format
from dashboards.formats.html import Context
from llmchaos.errors import UsageError


def compare(args: argparse.Namespace) -> int:
    settings, sel = options.settings(args), options.Selection.of(args)
    if args.prometheus:
        a_sample, b_sample = prometheus.sides(args)
        result = compare_sides([sel.apply(a_sample)], [sel.apply(b_sample)], settings)
        return emit(result, args, Context(prometheus=(a_sample, b_sample)))
    a, b = _run_sides(args)
    result = compare_sides([sel.apply(x.sample) for x in a], [sel.apply(x.sample) for x in b], settings)
    return emit(result, args, Context(a, b))


def regress(args: argparse.Namespace) -> int:
    settings, sel = options.settings(args), options.Selection.of(args)
    rules = regress_rules.load(args.rules, settings)
    a, b = runs.side(args.baseline), runs.side(args.current)
    gate: Gate = rules.gate
    result = compare_sides([sel.apply(x.sample) for x in a], [sel.apply(x.sample) for x in b], settings, gate)
    history = hist.load(Path(args.history), rules) if args.history else None
    lines = history.lines() if history is not None else []
    return emit(result, args, Context(a, b, history=history), "llmchaos regress", lines)


def _run_sides(args: argparse.Namespace) -> tuple[list[runs.Loaded], list[runs.Loaded]]:
    specs_a, specs_b, given = list(args.a), list(args.b), list(args.runs)
    if len(given) == 1 and not specs_a and not specs_b:
        replay = runs.replay_sides(given[0])
        if replay is None:
            raise UsageError(f"{given[0]} is not a replay's results directory (no a/ and b/): give A and B")
        specs_a, specs_b = [replay[0]], [replay[1]]
    elif len(given) == 2:
        specs_a.append(given[0])
        specs_b.append(given[1])
    elif given:
        raise UsageError(f"give A and B (got {len(given)} runs): use --a RUNS --b RUNS for repetitions")
    if not specs_a or not specs_b:
        raise UsageError("give A and B: llmchaos compare A B, or --a RUN,RUN --b RUN,RUN")
    return runs.side(specs_a), runs.side(specs_b)


def emit(
    result: Comparison,
    args: argparse.Namespace,
    context: Context,
    title: str = "llmchaos compare",
    lines: list[str] | None = None,
) -> int:
    """Print the comparison as asked (with `lines` after it: the history's change points) and write
    its files; its exit status."""
    lines = lines or []
    if args.json:
        print(json_format.render(result, {"history": lines}))
    elif args.md:
        print(markdown.render(result) + "".join(f"\n- {line}" for line in lines))
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
