"""A run's report in parts that every format shows alike (`run_page` as HTML, `run_markdown` as
Markdown, `run_summary` as text): the verdict, the phases in the order they ran with each fault phase's
multiple of the baseline, what a token cost and where its energy came from, how requests ended on a
cluster, each fault window's detection and recovery, and notes on what a figure means."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from dashboards.comparison import cost, plotted
from dashboards.comparison.sample import COSTS, PCTS
from dashboards.comparison.verdicts import METRICS
from dashboards.formats import text
from llmchaos.headers import KV_WAYS
from llmchaos.metrics import TURN_BUCKETS, turn_bucket
from llmchaos.run import Ending, Run, RunResults, SessionCount
from llmchaos.run.table import bound_lines, canary_lines, recovery_cells

Rows = tuple[list[str], list[list[str]]]  # a table's head and rows
BATCHED_SHARE = 0.05  # a phase whose reads brought several events this often: its ITL is the network's batching


class Table(NamedTuple):
    """A table under its caption ("": none), its first `names` columns names, not figures."""

    caption: str
    head: list[str]
    rows: list[list[str]]
    names: int = 2


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


def phase_rows(
    results: RunResults, metrics: Sequence[str] = ("ttft", "itl", "e2e"), pcts: Sequence[str] = tuple(PCTS)
) -> Rows:
    """Per language, its phases in the order they ran (warmup, baseline, then each fault phase by its
    window's start), every fault phase's figure beside its multiple of the baseline's: the latencies'
    percentiles, then J/token and $/Mtok where the run has them (`cost_columns`)."""
    rows = []
    at = plotted.phase_order(results.run)
    keys = sorted({(k.lang, k.phase) for k, _ in results.histograms}, key=lambda k: (k[0], at(k[1]), k[1]))
    spent, costs = cost.per_phase(results.run.cost), cost_columns(results.run)
    for lang, phase in keys:
        row = [lang, phase]
        for metric in metrics:
            h = results.histograms.combined(metric, lang=lang, phase=phase)
            base = results.histograms.combined(metric, lang=lang, phase="baseline")
            for p in pcts:
                v = h.quantile(PCTS[p]) if h is not None and h.count else None
                b = base.quantile(PCTS[p]) if base is not None and base.count else None
                row.append(_beside(v, b if phase != "baseline" else None, "s"))
        for metric in costs:
            v, b = (getattr(spent.get((lang, ph)), metric, None) for ph in (phase, "baseline"))
            row.append(_beside(v, b if phase != "baseline" else None, METRICS[metric].unit))
        n = sum(o.count for o in results.run.outcomes if (o.lang, o.phase) == (lang, phase))
        ok = sum(o.count for o in results.run.outcomes if (o.lang, o.phase, o.outcome) == (lang, phase, "ok"))
        rows.append([*row, str(n), f"{ok / n:.1%}" if n else "-"])
    labels = [f"{METRICS[m].label} {p}" for m in metrics for p in pcts] + [METRICS[m].label for m in costs]
    return ["lang", "phase", *labels, "requests", "ok"], rows


def _beside(v: float | None, base: float | None, unit: str) -> str:
    """A figure in its unit, and its multiple of `base` where there is one."""
    return text.value(v, unit) + (f" ×{v / base:.2g}" if v is not None and base else "")


def cost_columns(run: Run) -> tuple[str, ...]:
    """The cost figures some (lang, phase) of the run has: J/token, and $/Mtok where it was priced."""
    spent = cost.per_phase(run.cost).values()
    return tuple(m for m in COSTS if any(getattr(s, m) is not None for s in spent)) if run.energy else ()


def fault_phases(results: RunResults) -> bool:
    return any(k.phase not in ("warmup", "baseline") for k, _ in results.histograms)


def energy_lines(run: Run) -> list[str]:
    """Where the run's energy came from and what it amounts to, or why it is absent; nothing for a run
    that asked for none."""
    e = run.energy
    if e is None:
        return []
    if e.source == "absent":
        return [f"cost: absent ({e.why or 'no reason given'})"]
    gpus = f"{len(e.gpus)} GPU{'s' * (len(e.gpus) != 1)}" + (f" ({', '.join(e.gpus)})" if e.gpus else "")
    every = f" every {e.interval_s:.2g} s" if e.interval_s else ""
    parts = [
        f"energy: {e.source}, by {e.method or 'reading'} from {e.origin or '?'}, {gpus}, {e.samples} samples{every}"
    ]
    if e.energy_j is not None:
        parts.append(f"{e.energy_j:.1f} J, {e.unattributed_j or 0.0:.1f} J of it while no token was made")
    prices = [
        f"${p:g} per {unit}"
        for p, unit in ((e.price_per_gpu_hour, "GPU-hour"), (e.price_per_kwh, "kWh"))
        if p is not None
    ]
    parts.append(f"priced at {' and '.join(prices)}" if prices else "no price given")
    return ["; ".join(parts)] + ([f"energy note: {e.why}"] if e.why else [])


def cost_rows(run: Run) -> Rows | None:
    """Per language and phase: output tokens, requests, J/token, J/request, $/Mtok and the source (a row
    without figures says why); None for a run without figures."""
    if not cost_columns(run):
        return None
    at = plotted.phase_order(run)
    spent = sorted(cost.per_phase(run.cost).items(), key=lambda kv: (kv[0][0], at(kv[0][1]), kv[0][1]))
    rows = [
        [
            lang,
            phase,
            f"{s.tokens:.0f}",
            str(s.requests),
            text.value(s.j_per_token, "J/token"),
            text.value(s.j_per_request, "J"),
            text.value(s.usd_per_mtok, "$/Mtok"),
            s.source + (f": {s.why}" if s.why else ""),
        ]
        for (lang, phase), s in spent
    ]
    return ["lang", "phase", "output tokens", "requests", "J/token", "J/request", "$/Mtok", "source"], rows


KV_WORDS = {  # a KV way (x-llmchaos-kv, run.json's) as a reader says it
    "pulled": "pulled from prefill",
    "recomputed": "recomputed on decode",
    "failed": "failed fast",
    "timed_out": "hung until the KV timeout",
}
ENDINGS_NOTE = (
    "stranded: no byte for the stall limit before any content, then no answer; failed over: the router sent it "
    "to another replica at least once; failed: not ok; times from the request's intended start; silence: the "
    "longest wait with no byte from the server"
)


def ending_tables(run: Run) -> list[Table]:
    """How requests ended on a cluster, per phase (in the order they ran) and language: requests,
    stranded, failed over and the longest silence; per replica its requests and those failed; per KV
    way its requests and how long they took (the first table without a caption); none for a run where
    no request said any of it."""
    if not run.endings:
        return []
    at = plotted.phase_order(run)
    rows = sorted(run.endings, key=lambda e: (at(e.phase), e.phase, e.target, e.lang, e.api))
    many = len(run.targets) > 1

    def where(e: Ending) -> list[str]:
        return [e.phase, f"{e.lang} ({e.target})" if many else e.lang]

    head = ["phase", "lang", "requests", "stranded", "failed over", "longest silence"]
    each = [[*where(e), str(e.requests), str(e.stranded), str(e.failed_over), _seconds(e.silent_max_s)] for e in rows]
    tables = [Table("", head, each)]
    replicas = [[*where(e), name, str(r.requests), str(r.failed)] for e in rows for name, r in e.replicas.items()]
    if replicas:
        tables.append(Table("Per replica", ["phase", "lang", "replica", "requests", "failed"], replicas, 3))
    kv = [
        [
            *where(e),
            KV_WORDS[way],
            str(k.requests),
            *map(_seconds, (k.ttft_p50_s, k.end_p50_s, k.end_max_s, k.silent_max_s)),
        ]
        for e in rows
        for way in KV_WAYS
        if (k := e.kv.get(way)) is not None
    ]
    if kv:
        head = ["phase", "lang", "KV cache", "requests", "TTFT p50", "end p50", "end max", "longest silence"]
        tables.append(Table("How the decode engine got the prompt's KV cache", head, kv, 3))
    return tables


SESSIONS_NOTE = (
    "A conversation cut by a failed turn or by the test's end is counted so, never as a short one; "
    "TTFT p50 per turn bucket over the whole run (a later turn's prompt is its conversation so far); "
    "cached: the share of the bucket's prompt tokens the server found in its prefix cache, by its own usage "
    "counts (a request without a count counts 0, as vLLM and Gemini leave a count of 0 out; n/a: the server "
    "gave none in the run)."
)


def session_table(results: RunResults) -> Table | None:
    """The conversations of a run with --sessions, per language: how they ended, the turns sent, and
    TTFT p50 per turn bucket over the whole run, every phase (None: a run without sessions)."""
    run = results.run
    if not run.sessions:
        return None
    many = len(run.targets) > 1

    def p50(s: SessionCount, bucket: str) -> float | None:
        h = results.histograms.combined(f"ttft_turn_{bucket}", target=s.target, lang=s.lang, api=s.api)
        return h.quantile(50.0) if h is not None and h.count else None

    shares = _cache_shares(results)
    head = ["lang", "started", "completed", "cut by a failure", "cut by the stop", "turns"]
    head += [f"TTFT p50 turn {b}" for b in TURN_BUCKETS]
    head += [f"cached turn {b}" for b in TURN_BUCKETS]
    rows = [
        [
            f"{s.lang} ({s.target})" if many else s.lang,
            *map(str, (s.started, s.completed, s.cut_failed, s.cut_stop, s.turns)),
            *(_seconds(p50(s, b)) for b in TURN_BUCKETS),
            *(shares.get((s.target, s.lang, s.api, b), "") for b in TURN_BUCKETS),
        ]
        for s in sorted(run.sessions, key=lambda s: (s.target, s.lang, s.api))
    ]
    return Table("", head, rows, 1)


def _cache_shares(results: RunResults) -> dict[tuple[str, str, str, str], str]:
    """(target, lang, api, turn bucket) -> the share of its turns' prompt tokens found cached, from
    requests.jsonl (one pass), 'n/a' where the server gave no cached count in the whole run."""
    sums: dict[tuple[str, str, str, str], list[int]] = {}
    reported: set[str] = set()
    for r in results.requests():
        if r.turn is None or r.prompt_tokens is None:
            continue
        cell = sums.setdefault((r.target, r.lang, r.api, turn_bucket(r.turn)), [0, 0])
        cell[0] += r.cached_tokens or 0
        cell[1] += r.prompt_tokens
        if r.cached_tokens is not None:
            reported.add(r.target)
    return {
        k: f"{cached / prompt:.0%}" if k[0] in reported and prompt else "n/a" for k, (cached, prompt) in sums.items()
    }


def _seconds(v: float | None) -> str:
    return text.value(v, "s")


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
