"""The per-language summary of a run, as the load test prints it at the end and `llmchaos report`
prints it for any results directory."""

from __future__ import annotations

from llmchaos.histogram import Histogram, HistogramSet
from llmchaos.run.schema import Run

HEADER = (
    f"{'lang':5} {'reqs':>6} {'stop':>5} {'ok%':>6} {'ttft p50':>9} {'ttft p99':>9} {'itl p50':>8} {'itl p99':>8} "
    f"{'e2e p99':>8} {'tok/req':>7} {'slo':>5}"
)


def _ms(h: Histogram | None, pct: float) -> str:
    return f"{h.quantile(pct) * 1000:.1f}" if h is not None and h.count else "-"


def table(run: Run, hist: HistogramSet, location: str | None = None) -> str:
    """One line per (target, lang, api) over every phase: requests issued, requests cancelled by the
    end of the test (apart: not issued), success, TTFT/ITL/E2E in ms, output tokens per request,
    SLO verdict; then the run's validity."""
    lines = [f"llmchaos run {run.run_id}" + (f" -> {location}" if location else ""), HEADER]
    for row in run.slo:
        sel = {"target": row.target, "lang": row.lang, "api": row.api}
        ok = sum(
            o.count
            for o in run.outcomes
            if (o.target, o.lang, o.api) == (row.target, row.lang, row.api) and o.outcome == "ok"
        )
        ttft, itl, e2e, toks = (hist.combined(m, **sel) for m in ("ttft", "itl", "e2e", "output_tokens"))
        per_req = toks.sum / toks.count if toks is not None and toks.count else 0.0
        lines.append(
            f"{row.lang:5} {row.issued:6d} {row.cancelled_at_stop:5d} {100 * ok / max(row.issued, 1):6.1f} "
            f"{_ms(ttft, 50):>9} "
            f"{_ms(ttft, 99):>9} {_ms(itl, 50):>8} {_ms(itl, 99):>8} {_ms(e2e, 99):>8} {per_req:7.1f} "
            f"{'pass' if row.passed else 'FAIL':>5}"
        )
    if run.reads.reads:
        share = 100 * run.reads.coalesced / run.reads.reads
        lines.append(f"stream reads: {run.reads.reads}, {run.reads.coalesced} coalesced ({share:.2f} %)")
    if not run.validity.valid:
        lines.append(
            "INVALID RUN: the load generator could not keep up ("
            + "; ".join(run.validity.reasons or run.validity.flags)
            + "); its own queueing is in these latencies"
        )
    return "\n".join(lines)
