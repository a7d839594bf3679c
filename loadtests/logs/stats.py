"""`llmchaos logs stats`: what a log holds, streamed in bounded memory: the request rate over time,
the language and API mix, users and sessions (estimated past a thousand), prompt and output length
percentiles, and the lines that were skipped."""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from llmchaos import tokenizer
from llmchaos.histogram import Histogram
from loadtests.logs.log_record import LogRecord
from loadtests.logs.problems import Problems
from loadtests.logs.split import LangMix

KMV = 1024  # smallest hashes kept to estimate a distinct count
ROWS = 60  # the most lines of the rate table
QUANTILES = (50.0, 90.0, 99.0)


class Distinct:
    """How many distinct keys: exact up to KMV, then the K-minimum-values estimate."""

    def __init__(self) -> None:
        self._heap: list[int] = []  # the negated smallest hashes
        self._kept: set[int] = set()

    def add(self, key: str) -> None:
        h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
        if h in self._kept:
            return
        if len(self._heap) < KMV:
            heapq.heappush(self._heap, -h)
            self._kept.add(h)
        elif h < -self._heap[0]:
            self._kept.discard(-heapq.heappushpop(self._heap, -h))
            self._kept.add(h)

    @property
    def count(self) -> int:
        if len(self._heap) < KMV:
            return len(self._heap)
        return round((KMV - 1) / (-self._heap[0] / 2.0**64))


def body_text(body: dict[str, Any]) -> str:
    """The prompt text of an OpenAI or Gemini request body (messages, prompt or contents)."""
    if isinstance(msgs := body.get("messages"), list):
        return "".join(_content(m.get("content")) for m in msgs if isinstance(m, dict))
    if isinstance(prompt := body.get("prompt"), (str, list)):
        return prompt if isinstance(prompt, str) else "".join(p for p in prompt if isinstance(p, str))
    contents = body.get("contents")
    contents = contents if isinstance(contents, list) else []
    parts = [p for c in contents if isinstance(c, dict) for p in c.get("parts") or []]
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _content(c: object) -> str:
    if isinstance(c, str):
        return c
    return "".join(p.get("text", "") for p in c if isinstance(p, dict)) if isinstance(c, list) else ""


@dataclass
class LogStats:
    """Everything `stats` prints, gathered one record at a time."""

    mix: LangMix
    seed: int = 0
    requests: int = 0
    first: float | None = None
    last: float = 0.0
    per_minute: Counter[int] = field(default_factory=Counter)
    langs: Counter[str] = field(default_factory=Counter)
    assigned: int = 0  # requests whose language the mix gave
    apis: Counter[str] = field(default_factory=Counter)
    users: Distinct = field(default_factory=Distinct)
    sessions: Distinct = field(default_factory=Distinct)
    input_tokens: Histogram = field(default_factory=lambda: Histogram("output_tokens"))  # a histogram of tokens
    output_tokens: Histogram = field(default_factory=lambda: Histogram("output_tokens"))

    def add(self, rec: LogRecord) -> None:
        self.requests += 1
        self.first = rec.offset if self.first is None else self.first
        self.last = rec.offset
        self.per_minute[int(rec.offset // 60)] += 1
        if rec.lang is None:
            self.assigned += 1
        self.langs[rec.lang or self.mix.pick(rec.user, self.seed)] += 1
        self.apis[rec.api or "(--api)"] += 1
        self.users.add(rec.user)
        if rec.session is not None:
            self.sessions.add(rec.session)
        n = rec.input_tokens if rec.input_tokens is not None else tokenizer.count(body_text(rec.body or {}))
        self.input_tokens.record(max(n, 1))
        out = rec.output_tokens if rec.output_tokens is not None else _max_tokens(rec.body or {})
        if out is not None:
            self.output_tokens.record(max(out, 1))

    def to_json(self, problems: Problems) -> dict[str, Any]:
        span = self.last - (self.first or 0.0)
        return {
            "requests": self.requests,
            "duration_s": round(span, 3),
            "rate_per_s": round(self.requests / span, 3) if span > 0 else None,
            "per_minute": [[m, self.per_minute[m]] for m in range(max(self.per_minute, default=-1) + 1)],
            "langs": dict(self.langs.most_common()),
            "langs_assigned": self.assigned,
            "apis": dict(self.apis.most_common()),
            "users": self.users.count,
            "sessions": self.sessions.count,
            "input_tokens": _quantiles(self.input_tokens),
            "output_tokens": _quantiles(self.output_tokens),
            "problems": problems.to_json(),
        }


def _max_tokens(body: dict[str, Any]) -> int | None:
    for value in (body.get("max_tokens"), body.get("max_completion_tokens"), _gen(body).get("maxOutputTokens")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _gen(body: dict[str, Any]) -> dict[str, Any]:
    g = body.get("generationConfig")
    return g if isinstance(g, dict) else {}


def _quantiles(h: Histogram) -> dict[str, float]:
    if not h.count:
        return {}
    return {**{f"p{q:g}": round(h.quantile(q)) for q in QUANTILES}, "max": round(h.quantile(100.0))}


def gather(records: Iterable[LogRecord], mix: LangMix, seed: int = 0) -> LogStats:
    stats = LogStats(mix, seed)
    for rec in records:
        stats.add(rec)
    return stats


def render(path: str, fmt: str, data: dict[str, Any]) -> str:
    """The stats as text: the rate in up to ROWS rows, the mixes, the lengths, the skipped lines."""
    lines = [
        f"{path} ({fmt}): {data['requests']} requests over {data['duration_s']:.0f}s"
        + (f", {data['rate_per_s']:.2f}/s" if data["rate_per_s"] else "")
        + f", {sum(data['problems']['counts'].values())} lines skipped"
    ]
    per_minute = [n for _, n in data["per_minute"]]
    step = max(1, -(-len(per_minute) // ROWS))
    peak = max(per_minute, default=0) / step or 1
    lines.append(f"rate over time (requests/s, {step} min a row):")
    for i in range(0, len(per_minute), step):
        n = sum(per_minute[i : i + step]) / step
        lines.append(f"  {i // 60:3d}h{i % 60:02d}m {n / 60:9.2f} {'#' * round(40 * n / peak)}")
    total = max(data["requests"], 1)
    mix = " ".join(f"{k} {100 * v / total:.1f}%" for k, v in data["langs"].items())
    assigned = f" ({data['langs_assigned']} assigned by the mix)" if data["langs_assigned"] else ""
    lines.append(f"languages: {mix}{assigned}")
    lines.append("apis: " + " ".join(f"{k} {v}" for k, v in data["apis"].items()))
    lines.append(f"users: {data['users']}  sessions: {data['sessions']}")
    for name in ("input_tokens", "output_tokens"):
        lines.append(f"{name}: " + " ".join(f"{k} {v}" for k, v in data[name].items()))
    lines += ["skipped: " + line for line in _problem_lines(data["problems"])]
    return "\n".join(lines)


def _problem_lines(data: dict[str, Any]) -> list[str]:
    p = Problems(data["file"])
    p.merge(data)
    return p.lines()
