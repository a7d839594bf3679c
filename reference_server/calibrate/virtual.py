"""The engine in virtual time: the server's own scheduler and block manager under a profile's step
model, with no clock, no sampler and no HTTP. What `llmchaos serve --profile` would do with a workload,
in a fraction of a second per load level, so that a fit can try a profile hundreds of times.

Like the engine loop, a step schedules what has arrived (through the frontend) when it begins and its
tokens appear when it ends; a request's first token ends its last prefill step.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from reference_server.config import EngineConfig
from reference_server.profile import Profile
from reference_server.scheduler import Scheduler
from reference_server.sequence import SamplingParams, Sequence


@dataclass(frozen=True)
class Arrival:
    at: float  # seconds from the start
    prompt: int  # tokens
    output: int  # tokens (generated whatever the text, as with ignore_eos)
    shared: int = 0  # leading prompt tokens every request has alike (a system prompt)


@dataclass(frozen=True)
class Served:
    """A request as the virtual server answered it (seconds from its arrival)."""

    at: float
    ttft: float
    e2e: float
    output: int


def serve(profile: Profile, arrivals: Iterable[Arrival], seed: int = 0) -> list[Served]:
    """Every request of `arrivals` (sorted by `at`) through the profile's engine, in virtual time."""
    step, rng = profile.step, random.Random(seed)
    scheduler = Scheduler(EngineConfig.of(profile))
    due = sorted((a.at + _draw(rng, step.frontend, step.frontend_sigma), i, a) for i, a in enumerate(arrivals))
    seqs: dict[Sequence, Arrival] = {}
    first: dict[Sequence, float] = {}
    out: list[Served] = []
    now, i = 0.0, 0
    while i < len(due) or scheduler.has_work():
        if not scheduler.has_work():
            now = max(now, due[i][0])
        idle = not scheduler.has_work()
        while i < len(due) and due[i][0] <= now:
            _, n, a = due[i]
            seq = Sequence(_prompt(a, n), SamplingParams(max_tokens=a.output, ignore_eos=True), arrival=a.at)
            seqs[seq] = a
            scheduler.add(seq)
            i += 1
        batch = scheduler.schedule()
        if not batch:  # nothing fits (a prompt over the pool): the server would hang on it too
            raise ValueError(f"a request of {seqs and max(a.prompt for a in seqs.values())} tokens never fits")
        took = step.time(batch.num_prefill_tokens, batch.num_decode_seqs, batch.num_context_tokens) + idle * step.wake
        now += _draw(rng, took, step.jitter)
        scheduler.commit(batch)
        for seq in batch.sampling:
            seq.output_token_ids.append(0)
            first.setdefault(seq, now)
            if len(seq.output_token_ids) >= seq.params.max_tokens:
                scheduler.finish(seq, "length")
                a = seqs.pop(seq)
                out.append(Served(a.at, first.pop(seq) - a.at, now - a.at, len(seq.output_token_ids)))
    return out


def _draw(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma)) if sigma else median


def _prompt(a: Arrival, n: int) -> list[int]:
    """Token ids: the shared prefix alike in every request, the rest its own."""
    own = a.prompt - a.shared
    return [*range(a.shared), *range(1_000_000 + n * own, 1_000_000 + (n + 1) * own)]
