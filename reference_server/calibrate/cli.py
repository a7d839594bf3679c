"""`llmchaos calibrate`: fit a profile's step model to published curves or to a user's own runs, print
measured against simulated at every level, and write the profile."""

from __future__ import annotations

import argparse
import itertools
import shlex
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from llmchaos.cli import Subparsers, positive
from llmchaos.errors import UsageError

if TYPE_CHECKING:
    from reference_server.profile import Profile

EVALS = 400


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit a profile's step-time model to measured latency curves or to your server's runs",
        description="Fit the step model of a profile (llmchaos serve --profile) so that the server's own "
        "scheduler, run in virtual time, gives the measured TTFT and per-token latency at every level.",
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="results directories of your server at two or more loads")
    p.add_argument("--curves", default="", help="fit to published curves instead: a named set or a YAML file")
    p.add_argument("--holdout", nargs="+", default=[], metavar="RUN", help="runs to predict, not fit")
    p.add_argument(
        "--metrics",
        nargs=2,
        action="append",
        default=[],
        metavar=("BEFORE", "AFTER"),
        help="the server's /metrics scraped before and after a run: one pair per RUN, fitted then held out",
    )
    p.add_argument(
        "--prompt-tokens", type=positive(int), default=None, help="the runs' prompt length, without --metrics"
    )
    p.add_argument(
        "--base", default="", help="the profile to start from and keep the limits of (default: the default profile)"
    )
    p.add_argument(
        "--start", default="", help="the profile whose step model the fit starts from (default: the curves' guess)"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="fit nothing: how far the base profile is from the measurements",
    )
    p.add_argument("--evals", type=positive(int), default=EVALS, help="virtual runs the fit may try")
    p.add_argument("--name", default="", help="the written profile's name")
    p.add_argument("--out", default="", help="write the fitted profile (YAML) here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from reference_server import profile
    from reference_server.calibrate import curves, fit

    if bool(args.curves) == bool(args.runs):
        raise UsageError("give either --curves or RUN directories", field="RUN")
    base = profile.load(args.base or profile.DEFAULT)
    if args.curves:
        c = curves.load(args.curves)
        server, start, levels = replace(base, limits=c.limits), c.start or base.step, c.levels
        name, source = c.name, f"Step model fitted by `llmchaos calibrate --curves {args.curves}` to:\n{c.source}"
    else:
        levels = _levels(args)
        _fits_the_base(args, levels, base.limits.max_model_len)
        server, start = base, fit.first_guess(levels, base.step)
        name, source = "calibrated", f"Step model fitted by `llmchaos calibrate` to {', '.join(args.runs)}"
    start = profile.load(args.start).step if args.start else start
    if sum(level.fit for level in levels) < 2 and not args.check:
        raise UsageError("a fit needs two load levels or more", field="RUN")
    free = fit.FREE if args.curves else fit.FREE_RUNS
    step = base.step if args.check else fit.fit(server, start, levels, free, args.evals)
    out = replace(base, name=args.name or name, source=source, step=step)
    if args.out:  # the step model as the file holds it (its digits), which is what will be served
        _write(args.out, out)
        out = replace(out, step=profile.load(args.out).step)
    rows = fit.evaluate(server, out.step, levels)
    print(fit.table(rows))
    print(f"loss {fit.loss(rows):.4g}; largest error {max(abs(e) for r in rows for e in r.errors):.1%}")
    if args.out:
        residuals = [
            {"level": r.level.name, "fitted": r.level.fit, "errors": [round(e, 4) for e in r.errors]} for r in rows
        ]
        command = shlex.join(["llmchaos", "calibrate", *sys.argv[2:]]) if sys.argv[1:2] == ["calibrate"] else ""
        _write(
            args.out,
            replace(out, fitted={"command": command, "loss": round(fit.loss(rows), 6), "residuals": residuals}),
        )
        print(f"wrote {args.out}")
    return 0


def _write(path: str, p: Profile) -> None:
    from reference_server import profile

    with open(path, "w", encoding="utf-8") as f:
        f.write(profile.dump(p))


def _fits_the_base(args: argparse.Namespace, levels: tuple, max_model_len: int) -> None:
    """Every request replayed is one the base profile serves: a longer one is refused by a real server
    (and its prompt, built token by token, would take the fit hours)."""
    a = max((a for level in levels for a in level.arrivals), key=lambda a: a.prompt + a.output)
    if a.prompt + a.output > max_model_len:
        raise UsageError(
            f"a request of {a.prompt} prompt and {a.output} output tokens is longer than the base profile's "
            f"max_model_len, {max_model_len}",
            field="--prompt-tokens" if args.prompt_tokens is not None and not args.metrics else "--metrics",
        )


def _levels(args: argparse.Namespace) -> tuple:
    from reference_server.calibrate import measured

    paths = [(path, True) for path in args.runs] + [(path, False) for path in args.holdout]
    if args.metrics and len(args.metrics) != len(paths):
        raise UsageError(f"{len(args.metrics)} pairs of scrapes for {len(paths)} runs", field="--metrics")
    if not args.metrics and args.prompt_tokens is None:
        raise UsageError(
            "runs do not say how long their prompts were: give the server's /metrics scraped before and after "
            "each run, or --prompt-tokens N",
            field="--metrics",
        )
    given = [measured.from_metrics(*pair) for pair in args.metrics]
    prompts = given or [measured.Prompts(args.prompt_tokens)] * len(paths)
    levels = tuple(measured.level(path, p, fit) for (path, fit), p in zip(paths, prompts, strict=True))
    for i, j in itertools.combinations(range(len(levels)), 2):
        if levels[i].arrivals == levels[j].arrivals:  # the same requests at the same times: one run, not two levels
            raise UsageError(
                f"{paths[j][0]} holds the same requests as {paths[i][0]}: one run given twice", field="RUN"
            )
    return levels
