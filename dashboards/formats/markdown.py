"""The comparison as Markdown for a CI comment: the verdict, the cells that changed or could not be
told, then every cell folded away."""

from __future__ import annotations

from dashboards.comparison.verdicts import NO_CHANGE, Comparison, Finding
from dashboards.formats import text

HEAD = "| verdict | cell | A | B | change | interval | p adj | MDE |\n|---|---|---|---|---|---|---|---|"
MARK = {"worse": "🔴 worse", "better": "🟢 better", "inconclusive": "⚪ inconclusive", NO_CHANGE: "no change"}


def _row(r: Finding) -> str:
    cells = (MARK[r.verdict], text.cell(r) + ("" if r.gated else " (not gated)"), *text.numbers(r))
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render(c: Comparison) -> str:
    changed = [r for r in c.rows if r.verdict != NO_CHANGE]
    out = [f"### llmchaos: {text.headline(c)}", "", f"A: `{', '.join(c.a)}`  ", f"B: `{', '.join(c.b)}`", ""]
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
    out += ["", f"_{text.method(c)}_", *(f"- {n}" for n in c.notes)]
    return "\n".join(out)
