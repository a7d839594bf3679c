"""The HTML reports: one self-contained file (inline CSS and SVG, no script, nothing fetched) that
opens offline. The verdict is the first thing on the page, in one line and one colour.

A comparison shows its cells, then per language the latency CDFs of A and B, the percentiles with
their intervals, TTFT over time with the fault windows shaded, the outcomes, a replay's output drift
(mirrored pairs) and, for `regress --history`, each gated series with its change points. A run's
report (run_page.py) is built of the same parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape

from dashboards.comparison import plotted
from dashboards.comparison.history import History
from dashboards.comparison.runs import Loaded
from dashboards.comparison.sample import PCTS, Binned, RunSample
from dashboards.comparison.verdicts import BETTER, INCONCLUSIVE, NO_CHANGE, WORSE, Comparison, Finding
from dashboards.formats import svg, text
from llmchaos.histogram import Histogram
from llmchaos.run import RunResults

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2327;background:#fafafa}
main{max-width:1320px;margin:0 auto;padding:0 20px 40px}
.verdict{padding:18px 20px;color:#fff;font-size:26px;font-weight:700;margin:0 0 4px}
.verdict small{display:block;font-size:14px;font-weight:400;opacity:.95;margin-top:4px}
.worse{background:#c62828}.ok{background:#2e7d32}.none{background:#616161}
h2{margin:28px 0 8px;font-size:19px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{margin:18px 0 6px;font-size:16px}
table{border-collapse:collapse;background:#fff;margin:6px 0}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f0f0f0}td:nth-child(-n+2),th:nth-child(-n+2),td.label,th.label{text-align:left}
tr.worse td{background:#fdecea}tr.better td{background:#e8f5e9}tr.inconclusive td{color:#777}
.charts{display:flex;flex-wrap:wrap;gap:10px}
.chart{background:#fff;border:1px solid #e3e3e3}
.chart .ct{font-weight:600;font-size:12px}.chart .tk{font-size:10px;fill:#444}.chart .al{font-size:11px;fill:#333}
.chart .ax{stroke:#333}.chart .grid{stroke:#eee}.chart .whisker{stroke:#111;stroke-width:1.5}
.chart .mark{stroke:#c62828;stroke-width:1.5;stroke-dasharray:4 2}
.meta{color:#555;font-size:12px}.note{color:#8a6d00}
"""
OUTCOME_COLOURS = {"ok": "#2e7d32", "cancelled": "#9e9e9e", "rate_limited": "#f9a825", "timeout": "#6a1b9a"}
FALLBACK = ("#c62828", "#ef6c00", "#5d4037", "#00838f", "#ad1457", "#283593")
TIME_METRICS = (("ttft", 99.0, "TTFT p99"), ("itl", 99.0, "ITL p99"), ("e2e", 99.0, "E2E p99"))


@dataclass
class Context:
    """What a comparison's page draws from besides its cells."""

    a: Sequence[Loaded] = ()
    b: Sequence[Loaded] = ()
    prometheus: tuple[RunSample, RunSample] | None = None
    history: History | None = None
    extra: list[str] = field(default_factory=list)


def page(title: str, verdict_class: str, headline: str, sub: Iterable[str], sections: Iterable[str]) -> str:
    subs = "".join(f"<small>{escape(s)}</small>" for s in sub)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head><body>'
        f'<header id="verdict" class="verdict {verdict_class}">{escape(headline)}{subs}</header>'
        f"<main>{''.join(sections)}</main></body></html>\n"
    )


def table(
    head: Sequence[str], rows: Iterable[Sequence[str]], classes: Iterable[str] | None = None, left: int = 2
) -> str:
    """A table, each row of `classes` if given; its first `left` columns (names, not figures) aligned
    left (the first two by the stylesheet, any more by their class)."""
    cls = list(classes) if classes is not None else None

    def cell(tag: str, i: int, c: str) -> str:
        return f'<{tag} class="label">{escape(c)}</{tag}>' if 2 <= i < left else f"<{tag}>{escape(c)}</{tag}>"

    body = "".join(
        (f'<tr class="{cls[i]}">' if cls else "<tr>") + "".join(cell("td", j, c) for j, c in enumerate(r)) + "</tr>"
        for i, r in enumerate(rows)
    )
    return "<table><tr>" + "".join(cell("th", j, h) for j, h in enumerate(head)) + f"</tr>{body}</table>"


def _cells_table(rows: list[Finding]) -> str:
    return table(
        ("verdict", "cell", *text.NUMBERS, "note"),
        ((r.verdict, text.cell(r) + ("" if r.gated else " (not gated)"), *text.numbers(r), r.reason) for r in rows),
        (r.verdict.replace(" ", "-") for r in rows),
    )


# -- a comparison ------------------------------------------------------------------------------
def comparison(result: Comparison, ctx: Context, title: str = "llmchaos compare") -> str:
    gated = [r for r in result.rows if r.gated]
    cls = "worse" if result.worse else ("none" if gated and all(r.verdict == INCONCLUSIVE for r in gated) else "ok")
    changed = [r for r in result.rows if r.verdict in (WORSE, BETTER)]
    counts = result.counts()
    sections = [
        "<h2>Cells that changed</h2>",
        _cells_table(changed) if changed else "<p>none beyond the minimum effect</p>",
        f"<details><summary>all {len(result.rows)} cells ({counts[INCONCLUSIVE]} inconclusive, "
        f"{counts[NO_CHANGE]} no change)</summary>{_cells_table(result.rows)}</details>",
    ]
    langs = sorted({r.lang for r in result.rows})
    for lang in langs:
        sections.append(f'<h2 id="lang-{escape(lang)}">{escape(lang)}</h2><div class="charts">')
        sections += _cdfs(lang, ctx)
        sections += [_percentile_bars(result, lang, m) for m in ("ttft", "itl", "e2e")]
        sections += _over_time(lang, ctx)
        sections.append("</div>")
    sections += _outcomes(ctx)
    sections += _drift(ctx)
    if ctx.history is not None:
        sections += _history(ctx.history)
    sections.append(f'<h2>Method</h2><p class="meta">{escape(text.method(result))}</p>')
    sections += [f'<p class="note">{escape(n)}</p>' for n in result.notes]
    sub = [f"A: {', '.join(result.a)}", f"B: {', '.join(result.b)}"]
    return page(title, cls, text.headline(result), sub, sections)


def merged(results: RunResults, metric: str, lang: str) -> Histogram | None:
    """A language's histogram of `metric` over every phase but warmup."""
    out = None
    for key, h in results.histograms:
        if key.metric == metric and key.lang == lang and key.phase != "warmup":
            if out is None:
                out = Histogram(metric)
            out.merge(h)
    return out


def _cdfs(lang: str, ctx: Context) -> list[str]:
    out = []
    for metric, label in (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E")):
        chart = svg.Chart(f"{lang} {label}: CDF (log x)", "seconds", "share of samples", x_log=True)
        for side, runs in (("A", ctx.a), ("B", ctx.b)):
            for i, loaded in enumerate(runs):
                xs, ys = plotted.cdf(merged(loaded.results, metric, lang))
                chart.lines.append(
                    svg.Line(f"{side}{i + 1 if len(runs) > 1 else ''}", xs, ys, svg.SIDE_COLOURS[side], i > 0)
                )
        if ctx.prometheus is not None:
            for side, sample in zip("AB", ctx.prometheus, strict=True):
                xs, ys = _bucket_cdf(sample, lang, metric)
                chart.lines.append(svg.Line(f"{side} (buckets)", xs, ys, svg.SIDE_COLOURS[side], step=True))
        if chart.lines:
            out.append(svg.line_chart(chart))
    return out


def _bucket_cdf(sample: RunSample, lang: str, metric: str) -> tuple[list[float], list[float]]:
    cells = [c for k, c in sample.cells.items() if k.lang == lang and k.metric == metric and isinstance(c, Binned)]
    if not cells:
        return [], []
    total = sum(c.counts.sum(axis=0) for c in cells)
    cum = total.cumsum() / max(total.sum(), 1)
    return [float(e) for e in cells[0].edges[1:]], [float(v) for v in cum]


def _percentile_bars(result: Comparison, lang: str, metric: str) -> str:
    rows = [
        r for r in result.rows if r.lang == lang and r.metric == metric and r.stat in PCTS and r.phase == "baseline"
    ]
    rows.sort(key=lambda r: PCTS[r.stat])
    bars = []
    for r in rows:
        for side, v, ci in (("A", r.a, r.a_ci), ("B", r.b, r.b_ci)):
            if v is not None:
                lo, hi = ci if ci is not None else (None, None)
                bars.append(svg.Bar(r.stat, side, v * 1000, svg.SIDE_COLOURS[side], lo and lo * 1000, hi and hi * 1000))
    return svg.bar_chart(f"{lang} {metric} percentiles (baseline) with intervals", "ms", bars) if bars else ""


def _over_time(lang: str, ctx: Context) -> list[str]:
    """TTFT, ITL and E2E p99 of A and B over their runs' time, each side's fault windows shaded."""
    out = []
    for metric, pct, label in TIME_METRICS:
        chart = svg.Chart(f"{lang} {label} over time, fault windows shaded", "seconds from start", "ms")
        for side, runs in (("A", ctx.a), ("B", ctx.b)):
            for i, loaded in enumerate(runs):
                mids, series = plotted.over_time(loaded.columns, metric, pct)
                if lang in series:
                    run_name = f"{side}{i + 1 if len(runs) > 1 else ''}"
                    chart.lines.append(
                        svg.Line(run_name, list(mids), list(series[lang] * 1000), svg.SIDE_COLOURS[side], i > 0)
                    )
                if i == 0:
                    chart.spans += [
                        svg.Span(s, e, f"{side}: {name}")
                        for s, e, name in plotted.fault_spans(loaded.results.run, loaded.columns.start)
                    ]
        if chart.lines:
            out.append(svg.line_chart(chart))
    return out


def outcome_rows(label: str, results: RunResults) -> list[tuple[str, list[tuple[str, float, str]]]]:
    by_lang: dict[str, dict[str, int]] = {}
    for o in results.run.outcomes:
        by_lang.setdefault(o.lang, {}).setdefault(o.outcome, 0)
        by_lang[o.lang][o.outcome] += o.count
    return [
        (f"{lang} {label}".strip(), [(name, float(n), _outcome_colour(name)) for name, n in sorted(outs.items())])
        for lang, outs in sorted(by_lang.items())
    ]


def _outcome_colour(name: str) -> str:
    return OUTCOME_COLOURS.get(name, FALLBACK[sum(map(ord, name)) % len(FALLBACK)])


def _outcomes(ctx: Context) -> list[str]:
    rows = [
        row
        for side, runs in (("A", ctx.a), ("B", ctx.b))
        for loaded in runs
        for row in outcome_rows(side, loaded.results)
    ]
    return (
        ["<h2>Outcomes</h2>", svg.stacked("requests by outcome, per language and side", sorted(rows))] if rows else []
    )


def _drift(ctx: Context) -> list[str]:
    """A mirrored replay's pairs: per language, how many had the same text, and output tokens."""
    rows = []
    for loaded in (*ctx.a, *ctx.b):
        replay = loaded.results.run.replay
        if replay is None or not replay.mirror:
            continue
        rows = [
            (
                m.lang,
                str(m.pairs),
                f"{m.identical / m.pairs:.1%}" if m.pairs else "-",
                str(m.output_tokens_a),
                str(m.output_tokens_b),
            )
            for m in replay.mirror
        ]
        break
    if not rows:
        return []
    bars = [
        svg.Bar(lang, "identical", float(share.rstrip("%")) if share != "-" else 0.0, "#2e7d32")
        for lang, _, share, _, _ in rows
    ]
    return [
        "<h2>Output drift (mirrored pairs)</h2>",
        table(("lang", "pairs", "identical text", "output tokens A", "output tokens B"), rows),
        svg.bar_chart("identical output text per language", "% of pairs", bars),
    ]


def _history(h: History) -> list[str]:
    out = [f'<h2>History: {len(h.runs)} runs, change points (Apache Otava, E-divisive)</h2><div class="charts">']
    for s in h.series:
        chart = svg.Chart(f"{s.name}", "run", s.unit, y_from_zero=False)
        chart.lines.append(
            svg.Line(
                s.name,
                list(range(len(s.values))),
                [v * (1000 if s.unit == "ms" else 1) for v in s.values],
                svg.PALETTE[0],
            )
        )
        chart.marks = [(cp.index, f"change {cp.change:+.1%} at {h.runs[cp.index]}") for cp in s.change_points]
        out.append(svg.line_chart(chart))
    out.append("</div>")
    return out
