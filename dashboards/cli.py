"""`llmchaos report`, `llmchaos compare` and `llmchaos regress`: exit 0 no regression, 1 a
regression beyond the rules, 2 bad input."""

from __future__ import annotations

import argparse

from llmchaos.cli import Subparsers, positive


def register(sub: Subparsers) -> None:
    p = sub.add_parser("report", help="a results directory's per-language summary (and an HTML report)")
    p.add_argument("run", help="a results directory, DIR/<run_id>")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report of the run")
    p.set_defaults(func=run_report)

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
    _common(p)
    p.set_defaults(func=run_compare)

    p = sub.add_parser("regress", help="gate current runs against a baseline by per-language rules")
    p.add_argument("--baseline", nargs="+", required=True, metavar="RUN", help="baseline runs (or folders of runs)")
    p.add_argument("--current", nargs="+", required=True, metavar="RUN", help="current runs (or folders of runs)")
    p.add_argument("--rules", metavar="FILE", help="YAML rules per language and metric (default: the registry's SLOs)")
    p.add_argument("--history", metavar="DIR", help="one results directory per nightly run: change points over time")
    _common(p)
    p.set_defaults(func=run_regress)


def _common(p: argparse.ArgumentParser) -> None:
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


def run_report(args: argparse.Namespace) -> int:
    from dashboards.report import summary, write_html

    print(summary(args.run))
    if args.html:
        write_html(args.run, args.html)
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from dashboards.commands import compare

    return compare(args)


def run_regress(args: argparse.Namespace) -> int:
    from dashboards.commands import regress

    return regress(args)
