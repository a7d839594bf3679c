"""The one-run report (`llmchaos report RUN --html`): the SLO verdict on top, per-language percentiles
per phase in the order they ran (each fault phase beside its multiple of the baseline), the metrics
over time with the fault windows shaded, CDFs, outcomes, SLOs, the load generator's health, the
guard's trips, and each fault window's detection and recovery."""

from __future__ import annotations

from html import escape

from dashboards.comparison import plotted
from dashboards.comparison.runs import Loaded
from dashboards.comparison.sample import PCTS
from dashboards.formats import svg, text
from dashboards.formats.html import TIME_METRICS, merged, outcome_rows, page, table
from llmchaos.run import RunResults
from llmchaos.run.table import recovery_cells


def run_report(loaded: Loaded) -> str:
    results, cols = loaded.results, loaded.columns
    run = results.run
    failed = [row for row in run.slo if row.passed is False]
    if failed:
        detail = "; ".join(
            f"{row.lang} "
            + ", ".join(f"{c.slo} {c.value_ms or 0:.1f} > {c.threshold_ms:g}" for c in row.checks if not c.passed)
            for row in failed
        )
        headline, cls = f"SLO FAILED for {len(failed)} of {len(run.slo)} languages: {detail}", "worse"
    else:
        headline, cls = f"SLOs met for all {len(run.slo)} languages", "ok"
    sub = [f"run {run.run_id} ({run.start} to {run.end}, {run.duration_s:.0f} s) against {', '.join(run.targets)}"]
    if not run.validity.valid:
        sub.append("INVALID RUN: " + ", ".join(run.validity.flags))
    sub += _recovery_verdict(results)
    sections = ["<h2>Percentiles per language and phase</h2>", _phase_table(results), *_batched(results)]
    sections.append('<h2>Over time (fault windows shaded)</h2><div class="charts">')
    spans = [svg.Span(s, e, name) for s, e, name in plotted.fault_spans(run, cols.start)]
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
    sections += _guard(results) + _recovery(results)
    sections += [f'<p class="note">{escape(n)}</p>' for n in loaded.sample.notes]
    return page(f"llmchaos run {run.run_id}", cls, headline, sub, sections)


def _phase_table(results: RunResults) -> str:
    """Per language, its phases in the order they ran (warmup, baseline, then each fault phase by its
    window's start), every fault phase's figure beside its multiple of the baseline's."""
    rows = []
    at = plotted.phase_order(results.run)
    keys = sorted({(k.lang, k.phase) for k, _ in results.histograms}, key=lambda k: (k[0], at(k[1]), k[1]))
    for lang, phase in keys:
        row = [lang, phase]
        for metric in ("ttft", "itl", "e2e"):
            h = results.histograms.combined(metric, lang=lang, phase=phase)
            base = results.histograms.combined(metric, lang=lang, phase="baseline")
            for p in PCTS.values():
                v = h.quantile(p) if h is not None and h.count else None
                b = base.quantile(p) if base is not None and base.count and phase != "baseline" else None
                row.append(text.value(v, "s") + (f" ×{v / b:.2g}" if v is not None and b else ""))
        n = sum(o.count for o in results.run.outcomes if (o.lang, o.phase) == (lang, phase))
        ok = sum(o.count for o in results.run.outcomes if (o.lang, o.phase, o.outcome) == (lang, phase, "ok"))
        rows.append([*row, str(n), f"{ok / n:.1%}" if n else "-"])
    head = ["lang", "phase"] + [f"{m} {p}" for m in ("TTFT", "ITL", "E2E") for p in PCTS] + ["requests", "ok"]
    return table(head, rows)


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
            t.phase,
            ", ".join(t.actions),
        )
        for t in trips
    ]
    return [
        "<h2>Guard trips</h2>",
        table(("lang", "statistic", "threshold ms", "windows (ms)", "phase", "actions"), rows),
    ]


def _recovery(results: RunResults) -> list[str]:
    rows = [(r.window, r.lang, r.metric, *recovery_cells(r), str(r.stranded)) for r in results.run.recovery if r.judged]
    if not rows:
        return []
    first = results.run.recovery[0]
    note = f"windows of {first.window_s:g} s; back: {first.windows} in a row within the SLO, from the revert"
    head = ("fault window", "lang", "SLO", "over after its start", "back after its revert", "stranded")
    return ["<h2>Detection and recovery</h2>", table(head, rows), f'<p class="meta">{escape(note)}</p>']


def _recovery_verdict(results: RunResults) -> list[str]:
    """One line for the top: how many (fault window, language, SLO) came back, the slowest, those never."""
    judged = [r for r in results.run.recovery if r.judged]
    if not judged:
        return []
    back = [r for r in judged if r.recover_s is not None]
    line = f"recovery: {len(back)} of {len(judged)} (fault window, language, SLO) back within their SLO"
    if back:
        r = max(back, key=lambda r: r.recover_s or 0.0)
        line += f", the slowest {r.window} {r.lang} {r.metric} {recovery_cells(r)[1]} after its revert"
    never = sorted({f"{r.window} {r.lang}" for r in judged if r.recover_s is None})
    return [line] + ([f"never back within the run: {', '.join(never)}"] if never else [])


BATCHED_SHARE = 0.05  # a phase whose reads brought several events this often: its ITL is the network's batching


def _batched(results: RunResults) -> list[str]:
    """Why a phase's ITL can read near zero: the network delivered its events together (a rate limit
    or a proxy's hold releases them at once, so the tokens between them arrive in one read)."""
    notes = []
    for p in results.run.reads.phases:
        share = (p.coalesced - p.late) / p.reads if p.reads else 0.0
        if share >= BATCHED_SHARE:
            notes.append(
                f"ITL in {p.phase}: {share:.0%} of its stream reads brought several events the network delivered "
                "together, so the tokens between them arrived at once: a low ITL there is the network's batching, "
                "not a fast server (E2E and TTFT tell its cost)."
            )
    return [f'<p class="note">{escape(n)}</p>' for n in notes]
