"""The per-language summary of a run, as the load test prints it at the end and `llmchaos report`
prints it for any results directory."""

from __future__ import annotations

from llmchaos.histogram import Histogram, HistogramSet
from llmchaos.run.schema import Ending, KvEnding, Recovery, Run

HEADER = (
    f"{'lang':5} {'reqs':>6} {'stop':>5} {'ok%':>6} {'ttft p50':>9} {'ttft p99':>9} {'itl p50':>8} {'itl p99':>8} "
    f"{'e2e p99':>8} {'tok/req':>7} {'slo':>7}"
)
THINKING = f" {'ttfa p50':>9} {'think/req':>9}"  # a run that streamed thinking: time to answer, thinking tokens


def _ms(h: Histogram | None, pct: float) -> str:
    return f"{h.quantile(pct) * 1000:.1f}" if h is not None and h.count else "-"


def _thinking(hist: HistogramSet, sel: dict[str, str]) -> str:
    ttfa, think = hist.combined("ttfa", **sel), hist.combined("reasoning_tokens", **sel)
    per_req = f"{think.sum / think.count:.1f}" if think is not None and think.count else "-"
    return f" {_ms(ttfa, 50):>9} {per_req:>9}"


def table(run: Run, hist: HistogramSet, location: str | None = None) -> str:
    """One line per (target, lang, api) over every phase: requests issued, requests cancelled by the
    end of the test (apart: not issued), success, TTFT/ITL/E2E in ms, output tokens per request,
    SLO verdict (and, where any request thought first, time to first answer and thinking tokens per
    request that thought); then the run's validity."""
    thought = any(key.metric == "reasoning_tokens" for key, _ in hist)
    lines = [
        f"llmchaos run {run.run_id}" + (f" -> {location}" if location else ""),
        HEADER + (THINKING if thought else ""),
    ]
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
            f"{row.lang:5} {row.issued:6d} {row.cancelled_at_stop:5d} "
            f"{f'{100 * ok / row.issued:.1f}' if row.issued else '-':>6} "
            f"{_ms(ttft, 50):>9} "
            f"{_ms(ttft, 99):>9} {_ms(itl, 50):>8} {_ms(itl, 99):>8} {_ms(e2e, 99):>8} {per_req:7.1f} "
            f"{row.verdict:>7}" + (_thinking(hist, sel) if thought else "")
        )
    lines += recovery_lines(run) + ending_lines(run) + canary_lines(run) + cost_lines(run)
    reads = run.reads
    if reads.reads:
        lines.append(
            f"stream reads: {reads.reads}, {reads.coalesced} coalesced ({100 * reads.coalesced / reads.reads:.2f} %), "
            f"{reads.late} of them read late ({100 * reads.late / reads.reads:.2f} %, the generator's)"
        )
        batched = [f"{p.phase} {100 * (p.coalesced - p.late) / p.reads:.2f} %" for p in reads.phases if p.reads]
        if batched:
            lines.append("events the network delivered together, share of reads by phase: " + ", ".join(batched))
    lines += bound_lines(run)
    if run.validity.unjudged:
        lines.append("validity not judged on: " + "; ".join(run.validity.unjudged))
    if not run.validity.valid:
        lines.append(
            "INVALID RUN: the load generator could not keep up ("
            + "; ".join(run.validity.reasons or run.validity.flags)
            + "); its own queueing is in these latencies"
        )
    return "\n".join(lines)


def recovery_cells(r: Recovery) -> tuple[str, str, str]:
    """When `r`'s SLO first went over after its fault's start, when it was back after its revert, and
    how fast the window burned its error budget."""
    detected = "never" if r.detect_s is None else f"{r.detect_s:.1f} s"
    back = f"{r.recover_s:.1f} s" if r.recover_s is not None else "never within the run"
    return detected, back, "-" if r.burn is None else f"{r.burn:.2g}x"


def _recovery(r: Recovery) -> str:
    if not r.judged:
        return f"{r.metric} not judged (no window held the {r.needed} samples it needs)"
    detected, back, burn = recovery_cells(r)
    over = "never over" if r.detect_s is None else f"over {detected} after its start"
    return (
        f"{r.metric} {over}, "
        + (f"back {back} after its revert" if r.recover_s is not None else "never back within the run")
        + (f", budget burned {burn} during it" if r.burn is not None else "")
    )


def recovery_lines(run: Run) -> list[str]:
    """Per fault window and language: when each SLO was first over, and back within it for good."""
    if not run.recovery:
        return []
    first = run.recovery[0]
    lines = [f"recovery (windows of {first.window_s:g} s; back = {first.windows} in a row within the SLO):"]
    groups: dict[tuple[str, str], list[Recovery]] = {}
    for r in run.recovery:
        groups.setdefault((r.window, r.lang), []).append(r)
    for (window, lang), rows in groups.items():
        stranded = rows[0].stranded  # requests, the same under each SLO
        lines.append(
            f"  {window} {lang}: "
            + "; ".join(_recovery(r) for r in rows)
            + (f"; {stranded} stranded" if stranded else "")
        )
    return lines


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.3g} s"


def _way(way: str, k: KvEnding) -> str:
    return (
        f"{way} {k.requests} (ttft p50 {_s(k.ttft_p50_s)}, end p50 {_s(k.end_p50_s)}, max {_s(k.end_max_s)}, "
        f"silent up to {_s(k.silent_max_s)})"
    )


def _ending(e: Ending, many_targets: bool) -> str:
    parts = [
        f"{e.requests} requests, {e.stranded} stranded, {e.failed_over} failed over, silent up to {_s(e.silent_max_s)}"
    ]
    if e.replicas:
        parts.append(
            "replica "
            + ", ".join(
                f"{name} {r.requests}" + (f" ({r.failed} failed)" if r.failed else "") for name, r in e.replicas.items()
            )
        )
    if e.kv:
        parts.append("kv " + ", ".join(_way(way, k) for way, k in e.kv.items()))
    return f"  {e.target + ' ' if many_targets else ''}{e.phase} {e.lang}: " + "; ".join(parts)


def ending_lines(run: Run) -> list[str]:
    """How requests ended on a cluster, per phase (in the run's order) and language: stranded, failed
    over, the longest silence, per replica (and how many of its failed), per KV way and how long;
    nothing for a run where no request said any of it."""
    if not run.endings:
        return []
    order = {phase: i for i, phase in enumerate(["warmup", "baseline", *(f.name for f in run.faults)])}
    rows = sorted(run.endings, key=lambda e: (order.get(e.phase, len(order)), e.phase, e.target, e.lang, e.api))
    return [
        "endings (stranded: no byte for the stall limit before any content, then no answer):",
        *(_ending(e, len(run.targets) > 1) for e in rows),
    ]


def canary_lines(run: Run) -> list[str]:
    """How many canaries were sent, and where any answered wrong (per phase and language)."""
    if not run.canaries:
        return []
    sent, wrong = sum(c.sent for c in run.canaries), [c for c in run.canaries if c.wrong]
    if not wrong:
        return [f"canaries: {sent} sent, none answered wrong"]
    where = ", ".join(f"{c.phase} {c.lang} {c.wrong} of {c.sent}" for c in wrong)
    return [
        f"canaries: {sent} sent, {sum(c.wrong for c in wrong)} answered wrong (200, whole, failed its check): {where}"
    ]


def cost_lines(run: Run) -> list[str]:
    """What a token cost per language and phase (--energy-from): J/token, J/request, $/Mtok; where the
    energy is absent, why."""
    e = run.energy
    if e is None:
        return []
    if e.source == "absent":
        return [f"cost: absent ({e.why})"]
    joules = f"{e.energy_j:.1f} J" if e.energy_j is not None else "energy"
    method = f" by {e.method}" if e.method else ""
    every = f", read every {e.interval_s:.2g} s" if e.interval_s else ""
    idle = f"; {e.unattributed_j:.1f} J in intervals with no token" if e.unattributed_j else ""
    lines = [f"cost ({e.source}, {joules} of {len(e.gpus)} GPU(s){method}{every}, from {e.origin}{idle}):"]
    if e.why:
        lines.append(f"  note: {e.why}")
    for c in run.cost:
        who = f"{c.target + ' ' if len(run.targets) > 1 else ''}{c.lang} {c.phase}"
        if c.j_per_token is None:
            lines.append(f"  {who}: - ({c.why})")
            continue
        per_req = f", {c.j_per_request:.1f} J/request" if c.j_per_request is not None else ""
        usd = f", ${c.usd_per_mtok:.2f}/Mtok" if c.usd_per_mtok is not None else ""
        lines.append(f"  {who}: {c.j_per_token:.3f} J/token{per_req}{usd}")
    return lines


def bound_lines(run: Run) -> list[str]:
    """The generator's error bar (llmchaos/bounds.py) on TTFT and ITL p99: the widest per metric, and
    the languages it is not nothing for, widest first."""
    if not run.validity.bounds:
        return []
    parts = []
    for metric in ("ttft", "itl"):
        bars = [b for b in run.validity.bounds if b.metric == metric and b.percentile == 99.0 and b.phase is None]
        if not bars:
            continue
        down = max(b.value_ms - b.low_ms for b in bars)
        up = max(b.high_ms - b.value_ms for b in bars)
        if not down and not up:
            parts.append(f"{metric.upper()} exact")
            continue
        off = sorted((b for b in bars if b.high_ms > b.low_ms), key=lambda b: b.low_ms - b.high_ms)
        each = [
            f"{b.target + ' ' if len(run.targets) > 1 else ''}{b.lang} {b.value_ms:.1f} ms "
            f"{_spread(b.value_ms - b.low_ms, b.high_ms - b.value_ms)}"
            for b in off[:4]
        ]
        more = f", {len(off) - 4} more" if len(off) > 4 else ""
        parts.append(f"{metric.upper()} within {_spread(down, up)} ms ({', '.join(each)}{more})")
    return ["the generator's error bar at p99 (events that shared a read's stamp): " + "; ".join(parts)]


def _spread(down: float, up: float) -> str:
    """How far below and above a figure (ms) the truth can lie: -0.5, +0.1, ±0.19, -0.2/+0.31."""
    if not up:
        return f"-{_small(down)}"
    if not down:
        return f"+{_small(up)}"
    if _small(down) == _small(up):
        return f"±{_small(up)}"
    return f"-{_small(down)}/+{_small(up)}"


def _small(ms: float) -> str:
    return f"{ms:.2g}" if ms < 10 else f"{ms:.0f}"
