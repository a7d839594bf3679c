"""The comparison as Markdown for a CI comment: the verdict, the cells that changed or could not be
told, then every cell folded away. Every text that comes from the runs (languages, phase and fault
names, paths, notes) is escaped, as the HTML and JUnit outputs escape theirs: a name such as
`<img onerror=...>` or `a|b` is shown as written, never as markup or a broken table."""

from __future__ import annotations

import html
import re

from dashboards.comparison.verdicts import NO_CHANGE, Comparison, Finding
from dashboards.formats import text

HEAD = "| verdict | cell | A | B | change | interval | p adj | MDE |\n|---|---|---|---|---|---|---|---|"
MARK = {"worse": "🔴 worse", "better": "🟢 better", "inconclusive": "⚪ inconclusive", NO_CHANGE: "no change"}
SPECIAL = re.compile(r"([\\`*_\[\]|~])")  # what Markdown (GitHub's too) reads as a table's edge or formatting


def escape(s: str) -> str:
    """`s` as literal Markdown text on one line: HTML's own characters as entities, Markdown's
    (emphasis, code, links, a table cell's edge) escaped with a backslash, line breaks as spaces."""
    return SPECIAL.sub(r"\\\1", html.escape(" ".join(s.split()), quote=False))


def _row(r: Finding) -> str:
    cells = (MARK[r.verdict], escape(text.cell(r) + ("" if r.gated else " (not gated)")), *map(escape, text.numbers(r)))
    return "| " + " | ".join(cells) + " |"


def render(c: Comparison) -> str:
    changed = [r for r in c.rows if r.verdict != NO_CHANGE]
    out = [
        f"### llmchaos: {escape(text.headline(c))}",
        "",
        f"A: {escape(', '.join(c.a))}  ",
        f"B: {escape(', '.join(c.b))}",
        "",
    ]
    if changed:
        out += [HEAD, *(_row(r) for r in changed), ""]
    out += [
        f"<details><summary>all {len(c.rows)} cells</summary>",
        "",
        HEAD,
        *(_row(r) for r in c.rows),
        "",
        "</details>",
    ]
    out += ["", f"_{escape(text.method(c))}_", *(f"- {escape(n)}" for n in c.notes)]
    return "\n".join(out)
