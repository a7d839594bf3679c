"""`llmchaos regress --baseline RUN... --current RUN...`: the current runs gated against a baseline by
per-language rules (`--rules`, default the registry's SLOs) and, where the rules gate `recover_s`, by
each fault window's recovery, and `wrong`, by the canaries answered wrong, with the change points of a
history of nightly runs (`--history`);
exit 0 no regression, 1 a regression beyond the rules, 2 bad input."""

from __future__ import annotations

import argparse

from dashboards.compare import add_arguments
from llmchaos.cli import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("regress", help="gate current runs against a baseline by per-language rules")
    p.add_argument("--baseline", nargs="+", required=True, metavar="RUN", help="baseline runs (or folders of runs)")
    p.add_argument("--current", nargs="+", required=True, metavar="RUN", help="current runs (or folders of runs)")
    p.add_argument("--rules", metavar="FILE", help="YAML rules per language and metric (default: the registry's SLOs)")
    p.add_argument("--history", metavar="DIR", help="one results directory per nightly run: change points over time")
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dashboards.comparison import error_bars, flags, history, recovery_gate, rules, runs, wrong_gate
    from dashboards.comparison.verdicts import Gate, compare
    from dashboards.formats.emit import emit
    from dashboards.formats.html import Context

    settings, sel = flags.settings(args), flags.Selection.of(args)
    gates = rules.load(args.rules, settings)
    a, b = runs.side(args.baseline), runs.side(args.current)
    runs.match_energy(a, b)
    gate: Gate = gates.gate
    result = compare(
        [sel.apply(x.sample) for x in a], [sel.apply(x.sample) for x in b], settings, gate, runs.differences(a, b)
    )
    past = history.load(Path(args.history), gates) if args.history else None
    recovered, slower = recovery_gate.judge(
        gates, [x.results.run.recovery for x in a], [x.results.run.recovery for x in b]
    )
    answered, wronger = wrong_gate.judge(gates, [x.results.run.canaries for x in b])
    bars = error_bars.flippable(result, *([x.results.run.validity.bounds for x in side] for side in (a, b)))
    notes = {
        "recovery": recovered,
        "wrong": answered,
        "error_bars": bars,
        "history": past.lines() if past is not None else [],
    }
    status = emit(result, args, Context(a, b, history=past), "llmchaos regress", notes)
    return max(status, 1 if slower or wronger else 0)
