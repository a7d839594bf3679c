"""The statistics flags of `compare` and `regress` read into settings, each checked (a bad one is a
UsageError naming the flag), and the cells they select."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

from dashboards.comparison.sample import PCTS, RunSample
from dashboards.comparison.verdicts import METRICS, Settings
from llmchaos import languages
from llmchaos.errors import UsageError
from llmchaos.units import duration


def fraction(text: str, flag: str, low: float = 0.0, high: float = 1.0) -> float:
    """`5%` or `0.05`, within (low, high)."""
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(f"not a number or percentage: {text!r}", field=flag) from None
    if not (math.isfinite(v) and low <= v < high):
        raise UsageError(f"must be from {low:g} to below {high:g}, got {text!r}", field=flag)
    return v


def words(text: str, known: list[str], flag: str) -> tuple[str, ...]:
    out = tuple(w.strip() for w in text.split(",") if w.strip())
    for w in out:
        if w not in known:
            raise UsageError(f"unknown {w!r} (known: {', '.join(known)})", field=flag)
    return out


def settings(args: argparse.Namespace) -> Settings:
    alpha = fraction(args.alpha, "--alpha", 1e-9, 0.5)
    if alpha <= 0:
        raise UsageError("must be above 0", field="--alpha")
    return Settings(
        alpha=alpha,
        correction=args.correction,
        min_effect=fraction(args.min_effect, "--min-effect", 0.0, 10.0),
        min_abs=duration(args.min_abs, "--min-abs"),
        power=fraction(args.power, "--power", 0.01, 1.0),
        pcts=words(args.percentiles, list(PCTS), "--percentiles") or tuple(PCTS),
        resamples=args.resamples,
        seed=args.seed,
    )


@dataclass(frozen=True)
class Selection:
    langs: tuple[str, ...]
    metrics: tuple[str, ...]
    phases: tuple[str, ...]

    @classmethod
    def of(cls, args: argparse.Namespace) -> Selection:
        return cls(
            words(args.langs, languages.tags(), "--langs"),
            words(args.metrics, list(METRICS), "--metrics"),
            tuple(w.strip() for w in args.phases.split(",") if w.strip()),
        )

    def apply(self, s: RunSample) -> RunSample:
        """The run's cells this selection keeps (warmup only when named)."""
        keep = {
            k: c
            for k, c in s.cells.items()
            if (k.lang in self.langs or not self.langs)
            and (k.metric in self.metrics or not self.metrics)
            and (k.phase in self.phases if self.phases else k.phase != "warmup")
        }
        return replace(s, cells=keep)
