"""Load levels from a user's own runs: results directories of their server (read through the core's
run model) and, when given, the server's /metrics scraped before and after each run (vLLM's names),
which say how long its prompts were and how much of them the prefix cache served."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from llmchaos import run
from llmchaos.errors import UsageError
from reference_server.calibrate.level import Level, Stats
from reference_server.calibrate.virtual import Arrival

MIN_OK = 20  # requests a level needs for its percentiles
MAX_COUNT = 1e15  # a counter past this (a quadrillion tokens) is no server's
COUNTERS = (
    "vllm:prompt_tokens_total",
    "vllm:request_success_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
)


@dataclass(frozen=True)
class Prompts:
    tokens: int  # per request, mean
    shared: int = 0  # of them served by the prefix cache, mean


def from_metrics(before: str, after: str) -> Prompts:
    """The prompts of the requests between two scrapes of a vLLM-style /metrics."""
    a, b = _counters(before), _counters(after)
    d = {name: b[name] - a[name] for name in COUNTERS}
    if d["vllm:request_success_total"] <= 0 or d["vllm:prompt_tokens_total"] <= 0:
        raise UsageError("no requests finished between the two scrapes", file=after, field="vllm:request_success_total")
    tokens = d["vllm:prompt_tokens_total"] / d["vllm:request_success_total"]
    hit = (
        d["vllm:prefix_cache_hits_total"] / d["vllm:prefix_cache_queries_total"]
        if d["vllm:prefix_cache_queries_total"]
        else 0
    )
    return Prompts(max(1, round(tokens)), min(round(tokens * hit), max(0, round(tokens) - 1)))


def _counters(path: str) -> dict[str, float]:
    try:
        text = Path(path).read_text(encoding="utf-8")
        samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=path) from None
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise UsageError(f"not Prometheus text: {e}", file=path) from None
    for sample in samples:
        if sample.name in COUNTERS and not 0 <= sample.value < MAX_COUNT:  # NaN fails this too
            raise UsageError(f"not a count: {sample.value!r}", file=path, field=sample.name)
    sums = {name: sum(s.value for s in samples if s.name == name) for name in COUNTERS}
    missing = [name for name in COUNTERS[:2] if not any(s.name == name for s in samples)]
    if missing:
        raise UsageError("not in the scrape (a vLLM-style /metrics has it)", file=path, field=missing[0])
    return sums


def _at(a: Arrival) -> float:
    return a.at


def level(path: str, prompts: Prompts, fit: bool = True) -> Level:
    """A run as a level: its requests' own send times and output lengths, replayed with `prompts`."""
    results = run.load(path)
    if results.run.requests.sample_rate < 1.0:
        raise UsageError(
            f"requests.jsonl holds a sample ({results.run.requests.sample_rate:g}): calibrate needs every request",
            file=str(Path(path) / "run.json"),
            field="requests.sample_rate",
        )
    lines = [r for r in results.requests() if not r.at_stop and r.output_tokens > 0]
    ok = [r for r in lines if r.outcome == "ok" and r.ttft is not None and r.e2e is not None]
    if len(ok) < MIN_OK:
        raise UsageError(f"{len(ok)} requests ok with a first token; a level needs {MIN_OK}", file=path)
    t0 = min(r.intended for r in lines)
    if max(r.intended for r in lines) <= t0:
        raise UsageError("every request was due at the same moment: a level needs its rate", file=path)
    arrivals = tuple(
        sorted((Arrival(r.intended - t0, prompts.tokens, r.output_tokens, prompts.shared) for r in lines), key=_at)
    )
    streamed = [(r, r.output_tokens - r.unstreamed_tokens) for r in ok]  # hidden thinking came before the first token
    tpot = [(r.e2e - r.ttft) / (n - 1) for r, n in streamed if n > 1]  # type: ignore[operator]
    rate = (len(lines) - 1) / max(arrivals[-1].at, 1e-9)
    # The p50s only: a real server's tails (its GC, a busy CPU) are not step time, and would pull the fit.
    measured = Stats(float(np.median([r.ttft for r in ok])), None, float(np.median(tpot)) if tpot else None)
    return Level(f"{rate:.1f} req/s", arrivals, measured, "tpot_p50", fit=fit)
