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
    rows = [_cells(r) for r in c.rows]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(COLUMNS)]
    widths[-1] = 0  # the note runs on

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(cells, widths, strict=True)).rstrip()

    head = text.headline(c)
    out = [_paint(head, WORSE if c.worse else BETTER, colour), "A: " + ", ".join(c.a), "B: " + ", ".join(c.b), ""]
    out.append(line(COLUMNS))
    for r, cells in zip(c.rows, rows, strict=True):
        out.append(_paint(line(cells), r.verdict, colour))
    out += ["", text.method(c), *c.notes]
    return "\n".join(out)


def _paint(s: str, verdict: str, colour: bool) -> str:
    code = COLOURS.get(verdict)
    return f"{code}{s}{RESET}" if colour and code else s
