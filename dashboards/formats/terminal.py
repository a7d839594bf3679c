"""The comparison as a terminal table: worse cells first, coloured where the terminal supports it."""

from __future__ import annotations

import os
from typing import TextIO

from dashboards.comparison.verdicts import BETTER, INCONCLUSIVE, WORSE, Comparison, Finding
from dashboards.formats import text

COLOURS = {WORSE: "\033[31;1m", BETTER: "\033[32m", INCONCLUSIVE: "\033[33m"}
RESET = "\033[0m"
COLUMNS = ("verdict", "cell", *text.NUMBERS, "note")


def use_colour(stream: TextIO, asked: bool | None = None) -> bool:
    """Colour when asked, else on a terminal unless NO_COLOR is set (no-color.org)."""
    if asked is not None:
        return asked
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _cells(r: Finding) -> tuple[str, ...]:
    note = r.reason if r.verdict == INCONCLUSIVE else ("" if r.gated else "not gated")
    return (r.verdict, text.cell(r), *text.numbers(r), note)


def render(c: Comparison, colour: bool = False) -> str:
    head, *lines = text.aligned(COLUMNS, [_cells(r) for r in c.rows])  # the note runs on
    out = [_paint(text.headline(c), WORSE if c.worse else BETTER, colour), "A: " + ", ".join(c.a)]
    out += ["B: " + ", ".join(c.b), "", head]
    out += [_paint(line, r.verdict, colour) for r, line in zip(c.rows, lines, strict=True)]
    out += ["", text.method(c), *c.notes]
    return "\n".join(out)


def _paint(s: str, verdict: str, colour: bool) -> str:
    code = COLOURS.get(verdict)
    return f"{code}{s}{RESET}" if colour and code else s
