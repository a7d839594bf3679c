"""A realistic synthetic log in our JSONL format, for demos and tests: a daily swing of the request
rate, users with their own language (by the mix) and a few heavy ones, multi-turn sessions whose
turns repeat the conversation so far (a shared prefix), lognormal prompt and output lengths.

Deterministic for a seed; streamed out in time order (only the sessions under way are held).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from loadtests.logs import sized_prompts
from loadtests.logs.split import LangMix
from loadtests.logs.timestamps import iso

EPOCH_2024 = 1704067200.0  # 2024-01-01T00:00:00Z


@dataclass(frozen=True)
class Spec:
    duration: float = 600.0  # seconds of log
    rate: float = 2.0  # mean requests/s, follow-up turns included
    diurnal: float = 0.5  # amplitude of the rate's daily swing, 0..1 (0: a flat rate)
    period: float = 86400.0  # seconds of one "day"
    users: int = 500
    mix: LangMix = field(default_factory=lambda: LangMix.parse(""))
    sessions: float = 0.3  # share of conversations with more than one turn
    turns: int = 4  # most turns of a conversation
    think: float = 20.0  # mean seconds between a session's turns
    api: str = "openai-chat"
    input_median: float = 200.0  # tokens of a turn's new user text
    output_median: float = 100.0
    max_output: int = 1024
    tokens_only: bool = False  # input_tokens/output_tokens instead of request bodies
    seed: int = 0
    start: float = EPOCH_2024


@dataclass
class _Conversation:
    user: str
    lang: str
    session: str | None
    turns: int
    sent: int = 0  # turns so far
    history: list[tuple[str, str]] = field(default_factory=list)  # (role, text)
    tokens: int = 0  # the history's tokens


def lines(spec: Spec) -> Iterator[dict[str, Any]]:
    """The log's lines as objects, in time order."""
    rng = random.Random(spec.seed)
    per_conversation = (1 - spec.sessions) + spec.sessions * (2 + spec.turns) / 2
    peak = spec.rate * (1 + spec.diurnal) / per_conversation
    due: list[tuple[float, int, _Conversation]] = []  # follow-up turns: (t, tie-break, conversation)
    t, n = 0.0, 0
    while True:
        t += rng.expovariate(peak)  # thinning: a peak-rate Poisson process kept at rate(t)/peak
        while due and due[0][0] <= min(t, spec.duration):
            when, _, conv = heapq.heappop(due)
            yield _turn(spec, rng, conv, when, n)
            n += 1
            if conv.sent < conv.turns:
                heapq.heappush(due, (when + rng.expovariate(1 / spec.think), n, conv))
        if t >= spec.duration:
            return
        if rng.random() * (1 + spec.diurnal) > 1 + spec.diurnal * math.sin(2 * math.pi * t / spec.period):
            continue
        user = f"u{min(spec.users - 1, int(spec.users * rng.random() ** 2)):06d}"  # a few users send most
        multi = rng.random() < spec.sessions
        conv = _Conversation(
            user,
            spec.mix.pick(user, spec.seed),
            f"s{spec.seed}-{n}" if multi else None,
            rng.randint(2, max(2, spec.turns)) if multi else 1,
        )
        yield _turn(spec, rng, conv, t, n)
        n += 1
        if conv.turns > 1:
            heapq.heappush(due, (t + rng.expovariate(1 / spec.think), n, conv))


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return max(low, min(high, round(rng.lognormvariate(math.log(median), sigma))))


def _turn(spec: Spec, rng: random.Random, conv: _Conversation, t: float, n: int) -> dict[str, Any]:
    new = _lognormal(rng, spec.input_median, 0.8, 4, 4000)
    out = _lognormal(rng, spec.output_median, 0.6, 4, spec.max_output)
    line: dict[str, Any] = {"ts": iso(spec.start + t), "user_id": conv.user}
    if conv.session is not None:
        line["session_id"] = conv.session
    line["lang"] = conv.lang
    if spec.tokens_only:
        line |= {"input_tokens": conv.tokens + new, "output_tokens": out}
    else:
        ask = sized_prompts.block(conv.lang, f"synth{spec.seed}:{n}:u", new)
        line |= {"api": spec.api, "model": "synth", "request": _body(spec.api, [*conv.history, ("user", ask)], out)}
        conv.history += [("user", ask), ("assistant", sized_prompts.block(conv.lang, f"synth{spec.seed}:{n}:a", out))]
    conv.tokens += new + out
    conv.sent += 1
    line["response"] = {"status": 200, "output_tokens": out}
    return line


def _body(api: str, turns: list[tuple[str, str]], max_tokens: int) -> dict[str, Any]:
    if api == "gemini":
        contents = [{"role": "model" if r == "assistant" else "user", "parts": [{"text": x}]} for r, x in turns]
        return {"contents": contents, "generationConfig": {"maxOutputTokens": max_tokens}}
    if api == "openai-completions":
        return {"model": "synth", "prompt": "".join(x for _, x in turns), "max_tokens": max_tokens}
    messages = [{"role": r, "content": x} for r, x in turns]
    return {"model": "synth", "messages": messages, "max_tokens": max_tokens}
