"""`llmchaos compare A B`: per-language A/B verdicts between two runs (or repetitions of each, or a
replay's two sides, or two Prometheus selectors); exit 0 no regression, 1 B worse somewhere it is
gated, 2 bad input. Its statistics and output flags are `regress`'s too."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from llmchaos.cli import Subparsers, positive
from llmchaos.errors import UsageError

if TYPE_CHECKING:
    from dashboards.comparison.runs import Loaded


def register(sub: Subparsers) -> None:
    p = sub.add_parser("compare", help="per-language A/B verdicts: results directories or Prometheus")
    p.add_argument("runs", nargs="*", metavar="RUN", help="A and B (or a replay's results directory: its a/ and b/)")
    p.add_argument("--a", action="append", default=[], metavar="RUNS", help="A's runs, comma-separated (repetitions)")
    p.add_argument("--b", action="append", default=[], metavar="RUNS", help="B's runs, comma-separated")
    p.add_argument(
        "--prometheus", metavar="URL", help="read the llmchaos_* histograms from Prometheus: --a/--b are selectors"
    )
    p.add_argument("--range", metavar="START,END", help="Prometheus: the time range (RFC 3339 or unix seconds)")
    p.add_argument("--range-b", metavar="START,END", help="Prometheus: B's own range (two time ranges)")
    p.add_argument(
        "--step", type=positive(float), default=None, help="Prometheus: seconds per block (default: range/60)"
    )
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The statistics and output flags of `compare` and `regress`."""
    g = p.add_argument_group("statistics")
    g.add_argument("--alpha", default="0.05", help="family-wise error rate (Holm) or false discovery rate (BH)")
    g.add_argument("--correction", choices=["holm", "bh"], default="holm")
    g.add_argument("--min-effect", default="5%", help="smallest relative change that counts (e.g. 5%%)")
    g.add_argument("--min-abs", default="1ms", help="smallest absolute latency change that counts (e.g. 1ms)")
    g.add_argument("--power", default="0.8", help="power at which the minimum detectable effect is given")
    g.add_argument("--percentiles", default="p50,p90,p95,p99")
    g.add_argument("--metrics", default="", help="metrics to compare (default: all)")
    g.add_argument("--langs", default="", help="languages to compare (default: all in common)")
    g.add_argument("--phases", default="", help="phases to compare (default: all in common but warmup)")
    g.add_argument("--resamples", type=positive(int), default=400, help="bootstrap resamples")
    g.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("output")
    fmt = g.add_mutually_exclusive_group()
    fmt.add_argument("--md", action="store_true", help="Markdown (for a CI comment) instead of the table")
    fmt.add_argument("--json", action="store_true", help="JSON instead of the table")
    g.add_argument("--junit", metavar="FILE", help="write JUnit XML: one test case per gated cell")
    g.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    g.add_argument("--color", action=argparse.BooleanOptionalAction, default=None, help="colour the table")


def run(args: argparse.Namespace) -> int:
    from dashboards.comparison import error_bars, flags, prometheus, recovery_gate, runs, wrong_gate
    from dashboards.comparison.verdicts import compare
    from dashboards.formats.emit import emit
    from dashboards.formats.html import Context

    settings, sel = flags.settings(args), flags.Selection.of(args)
    if args.prometheus:
        a_sample, b_sample = prometheus.sides(args)
        result = compare([sel.apply(a_sample)], [sel.apply(b_sample)], settings)
        return emit(result, args, Context(prometheus=(a_sample, b_sample)))
    a, b = _sides(args)
    runs.match_energy(a, b)
    result = compare(
        [sel.apply(x.sample) for x in a], [sel.apply(x.sample) for x in b], settings, None, runs.differences(a, b)
    )
    recovered = recovery_gate.side_by_side([x.results.run.recovery for x in a], [x.results.run.recovery for x in b])
    answered = wrong_gate.side_by_side([x.results.run.canaries for x in a], [x.results.run.canaries for x in b])
    bars = error_bars.flippable(result, *([x.results.run.validity.bounds for x in side] for side in (a, b)))
    return emit(result, args, Context(a, b), notes={"recovery": recovered, "wrong": answered, "error_bars": bars})


def _sides(args: argparse.Namespace) -> tuple[list[Loaded], list[Loaded]]:
    from dashboards.comparison import runs

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
