"""A run's report in parts that every format shows alike (`run_page` as HTML, `run_markdown` as
Markdown): the verdict, the phases in the order they ran with each fault phase's multiple of the
baseline, each fault window's detection and recovery, and notes on what a figure means."""

from __future__ import annotations

from dashboards.comparison import plotted
from dashboards.comparison.sample import PCTS
from dashboards.formats import text
from llmchaos.run import Run, RunResults
from llmchaos.run.table import bound_lines, canary_lines, recovery_cells

Rows = tuple[list[str], list[list[str]]]  # a table's head and rows
BATCHED_SHARE = 0.05  # a phase whose reads brought several events this often: its ITL is the network's batching


def verdict(run: Run) -> tuple[str, bool]:
    """The headline (the SLOs per language) and whether they were all met."""
    failed = [row for row in run.slo if row.passed is False]
    if not failed:
        return f"SLOs met for all {len(run.slo)} languages", True
    detail = "; ".join(
        f"{row.lang} "
        + ", ".join(f"{c.slo} {c.value_ms or 0:.1f} > {c.threshold_ms:g}" for c in row.checks if not c.passed)
        for row in failed
    )
    return f"SLO FAILED for {len(failed)} of {len(run.slo)} languages: {detail}", False


def summary_lines(results: RunResults) -> list[str]:
    """What goes under the headline: the run, its validity, its recovery."""
    run = results.run
    out = [f"run {run.run_id} ({run.start} to {run.end}, {run.duration_s:.0f} s) against {', '.join(run.targets)}"]
    if not run.validity.valid:
        out.append("INVALID RUN: " + "; ".join(run.validity.reasons or run.validity.flags))
    out += bound_lines(run)
    return out + recovery_verdict(results) + canary_lines(run)


def phase_rows(results: RunResults) -> Rows:
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
    return head, rows


def recovery_rows(results: RunResults) -> tuple[list[str], list[list[str]], str] | None:
    """Each judged (fault window, language, SLO): over after its start, back after its revert, and the
    rule's note; None without any."""
    rows = [[r.window, r.lang, r.metric, *recovery_cells(r), str(r.stranded)] for r in results.run.recovery if r.judged]
    if not rows:
        return None
    first = results.run.recovery[0]
    note = f"windows of {first.window_s:g} s; back: {first.windows} in a row within the SLO, from the revert"
    head = ["fault window", "lang", "SLO", "over after its start", "back after its revert", "budget burn", "stranded"]
    return head, rows, note


def recovery_verdict(results: RunResults) -> list[str]:
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


def batched_notes(results: RunResults) -> list[str]:
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
    return notes
