"""The one-run report (`llmchaos report RUN --html`): the SLO verdict on top, per-language percentiles
per phase in the order they ran (each fault phase beside its multiple of the baseline), what a token
cost (J/token, J/request, $/Mtok per language and phase, and where the energy came from), the metrics
over time with the fault windows shaded, CDFs, outcomes, SLOs, the load generator's health, the
guard's trips, how requests ended on a cluster, and each fault window's detection and recovery."""

from __future__ import annotations

from html import escape

from dashboards.comparison import plotted
from dashboards.comparison.runs import Loaded
from dashboards.formats import run_parts, svg
from dashboards.formats.html import TIME_METRICS, merged, outcome_rows, page, table
from llmchaos.run import Run, RunResults


def run_report(loaded: Loaded) -> str:
    results, cols = loaded.results, loaded.columns
    run = results.run
    headline, met = run_parts.verdict(run)
    sub = run_parts.summary_lines(results)
    notes = [f'<p class="note">{escape(n)}</p>' for n in run_parts.batched_notes(results)]
    sections = ["<h2>Percentiles per language and phase</h2>", table(*run_parts.phase_rows(results)), *notes]
    sections += _cost(run)
    sections.append('<h2>Over time (fault windows shaded)</h2><div class="charts">')
    spans = [svg.Span(s, e, name) for s, e, name in plotted.fault_spans(run, cols.start)]
    marks = plotted.recovery_marks(run, cols.start)  # each fault window's recovery, a line with its tooltip
    for metric, pct, label in (*TIME_METRICS, ("error_rate", 0.0, "error rate")):
        mids, series = plotted.over_time(cols, metric, pct)
        scale = 100.0 if metric == "error_rate" else 1000.0
        lines = [
            svg.Line(lang, list(mids), list(v * scale), svg.PALETTE[i % len(svg.PALETTE)])
            for i, (lang, v) in enumerate(sorted(series.items()))
        ]
        sections.append(
            svg.line_chart(
                svg.Chart(
                    f"{label} per language",
                    "seconds from start",
                    "%" if metric == "error_rate" else "ms",
                    lines,
                    list(spans),
                    list(marks),
                )
            )
        )
    sections.append('</div><h2>Latency CDFs</h2><div class="charts">')
    langs = sorted({key.lang for key, _ in results.histograms})
    thought = any(key.metric == "reasoning_tokens" for key, _ in results.histograms)
    for metric, label in (("ttft", "TTFT"), *([("ttfa", "Time to first answer")] if thought else []), ("e2e", "E2E")):
        chart = svg.Chart(f"{label} CDF per language (log x)", "seconds", "share", x_log=True)
        for i, lang in enumerate(langs):
            xs, ys = plotted.cdf(merged(results, metric, lang))
            chart.lines.append(svg.Line(lang, xs, ys, svg.PALETTE[i % len(svg.PALETTE)]))
        sections.append(svg.line_chart(chart))
    sections.append("</div>")
    rows = outcome_rows("", results)
    if rows:
        sections += ["<h2>Outcomes</h2>", svg.stacked("requests by outcome, per language", rows)]
    sections += ["<h2>SLOs</h2>", _slo_table(results), "<h2>Load generator</h2>", _generator_table(results)]
    sections += _guard(results) + _endings(run) + _sessions(results) + _recovery(results)
    sections += [f'<p class="note">{escape(n)}</p>' for n in loaded.sample.notes]
    return page(f"llmchaos run {run.run_id}", "ok" if met else "worse", headline, sub, sections)


def _slo_table(results: RunResults) -> str:
    rows = [
        (
            r.lang,
            r.verdict,
            ", ".join(f"{c.slo} {c.value_ms or 0:.1f}/{c.threshold_ms:g}" for c in r.checks),
            str(r.issued),
            "-" if r.attainment is None else f"{r.attainment:.1%}",
            "-" if r.goodput_rps is None else f"{r.goodput_rps:.2f}/s",
        )
        for r in results.run.slo
    ]
    return table(("lang", "verdict", "checks (ms: value/threshold)", "issued", "attainment", "goodput"), rows)


def _generator_table(results: RunResults) -> str:
    run = results.run
    rows = [
        (name, *(f"{v:g}" if isinstance(v, (int, float)) else str(v) for v in g.values()))
        for name, g in run.generator.items()
    ]
    head = ["process", *next(iter(run.generator.values()), {}).keys()]
    verdict = "valid" if run.validity.valid else "INVALID: " + ", ".join(run.validity.flags)
    return table(head, rows) + f'<p class="meta">{escape(verdict)}; host {escape(str(run.host))}</p>'


def _guard(results: RunResults) -> list[str]:
    trips = results.run.guard
    if not trips:
        return []
    rows = [
        (
            t.lang,
            f"{t.metric} p{t.percentile:g}",
            f"{t.threshold_ms:g}",
            ", ".join(f"{v:.1f}" for v in t.windows_ms),
            t.phase if t.fault is None else f"{t.phase} (not back {t.tripped - t.started:.0f} s after {t.fault})",
            ", ".join(t.actions),
        )
        for t in trips
    ]
    return [
        "<h2>Guard trips</h2>",
        table(("lang", "statistic", "threshold ms", "windows (ms)", "phase", "actions"), rows),
    ]


def _cost(run: Run) -> list[str]:
    energy, costs = run_parts.energy_lines(run), run_parts.cost_rows(run)
    if not energy:
        return []
    lines = [f'<p class="meta">{escape(line)}</p>' for line in energy]
    return ["<h2>Cost per output token</h2>", *lines, *([table(*costs)] if costs is not None else [])]


def _endings(run: Run) -> list[str]:
    tables = run_parts.ending_tables(run)
    if not tables:
        return []
    out = ["<h2>Endings on the cluster</h2>"]
    for t in tables:
        if t.caption:
            out.append(f"<h3>{escape(t.caption)}</h3>")
        out.append(table(t.head, t.rows, left=t.names))
    return [*out, f'<p class="meta">{escape(run_parts.ENDINGS_NOTE)}</p>']


def _sessions(results: RunResults) -> list[str]:
    t = run_parts.session_table(results)
    if t is None:
        return []
    note = f'<p class="meta">{escape(run_parts.SESSIONS_NOTE)}</p>'
    return ["<h2>Conversations</h2>", table(t.head, t.rows, left=t.names), note]


def _recovery(results: RunResults) -> list[str]:
    parts = run_parts.recovery_rows(results)
    if parts is None:
        return []
    head, rows, note = parts
    return ["<h2>Detection and recovery</h2>", table(head, rows), f'<p class="meta">{escape(note)}</p>']
