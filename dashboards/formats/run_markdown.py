"""A run's report as Markdown (`llmchaos report RUN --md`), for a CI comment or a ticket: the same
verdict, phases, cost, endings, recovery and notes as the HTML page (`run_parts`), every text from
the run escaped."""

from __future__ import annotations

from dashboards.formats import run_parts
from dashboards.formats.markdown import escape
from llmchaos.run import RunResults


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(map(escape, head)) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(map(escape, row)) + " |" for row in rows),
    ]


def render(results: RunResults) -> str:
    headline, met = run_parts.verdict(results.run)
    out = [f"### llmchaos: {'🟢' if met else '🔴'} {escape(headline)}", ""]
    out += [f"{escape(line)}  " for line in run_parts.summary_lines(results)]
    out += ["", "#### Percentiles per language and phase", "", *_table(*run_parts.phase_rows(results))]
    out += [f"\n_{escape(note)}_" for note in run_parts.batched_notes(results)]
    energy, costs = run_parts.energy_lines(results.run), run_parts.cost_rows(results.run)
    if energy:
        out += ["", "#### Cost per output token", "", *(f"{escape(line)}  " for line in energy)]
    if costs is not None:
        out += ["", *_table(*costs)]
    out += _endings(results)
    if (conversations := run_parts.session_table(results)) is not None:
        out += ["", "#### Conversations", "", *_table(conversations.head, conversations.rows)]
        out += ["", f"_{escape(run_parts.SESSIONS_NOTE)}_"]
    recovery = run_parts.recovery_rows(results)
    if recovery is not None:
        head, rows, note = recovery
        out += ["", "#### Detection and recovery", "", *_table(head, rows), "", f"_{escape(note)}_"]
    return "\n".join(out)


def _endings(results: RunResults) -> list[str]:
    tables = run_parts.ending_tables(results.run)
    if not tables:
        return []
    out = ["", "#### Endings on the cluster"]
    for t in tables:
        out += ["", *([f"**{escape(t.caption)}**", ""] if t.caption else []), *_table(t.head, t.rows)]
    return [*out, "", f"_{escape(run_parts.ENDINGS_NOTE)}_"]
