"""The comparison as JSON: every cell with its figures, and how they were reached."""

from __future__ import annotations

from typing import Any

import orjson

from dashboards.comparison.bootstrap import CORRECTION_NAMES
from dashboards.comparison.verdicts import Comparison, Finding
from dashboards.formats import text


def _row(r: Finding) -> dict[str, Any]:
    return {
        "lang": r.lang,
        "metric": r.metric,
        "phase": r.phase,
        "stat": r.stat,
        "unit": r.unit,
        "verdict": r.verdict,
        "gated": r.gated,
        "a": r.a,
        "b": r.b,
        "n_a": r.n_a,
        "n_b": r.n_b,
        "rel": r.rel,
        "rel_ci": r.rel_ci,
        "abs": r.abs,
        "abs_ci": r.abs_ci,
        "p": r.p,
        "p_adj": r.p_adj,
        "mde_rel": r.mde_rel,
        "mde_abs": r.mde_abs,
        "method": r.method,
        "reason": r.reason or None,
        "rule": None if r.rule is None else vars(r.rule),
    }


def document(c: Comparison) -> dict[str, Any]:
    s = c.settings
    return {
        "verdict": "worse" if c.worse else "no worse",
        "headline": text.headline(c),
        "exit_code": c.exit_code,
        "a": c.a,
        "b": c.b,
        "method": {
            "correction": CORRECTION_NAMES[s.correction],
            "alpha": s.alpha,
            "min_effect": s.min_effect,
            "min_abs_s": s.min_abs,
            "power": s.power,
            "resamples": s.resamples,
            "interval_level": 1 - s.alpha,
            "seed": s.seed,
        },
        "counts": c.counts(),
        "notes": c.notes,
        "cells": [_row(r) for r in c.rows],
    }


def render(c: Comparison, extra: dict[str, Any] | None = None) -> str:
    return orjson.dumps(
        {**document(c), **(extra or {})}, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    ).decode()
