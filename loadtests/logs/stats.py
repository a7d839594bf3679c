"""`llmchaos logs stats`: what a log holds, streamed in bounded memory: the request rate over time,
the language and API mix, users and sessions (estimated past a thousand), prompt and output length
percentiles, and the lines that were skipped."""

from __future__ import annotations

import hashlib
import heapq
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from llmchaos import tokenizer
from loadtests.logs.log_record import LogRecord
from loadtests.logs.problems import Problems
from loadtests.logs.split import LangMix

KMV = 1024  # smallest hashes kept to estimate a distinct count
ROWS = 60  # the most lines of the rate table
QUANTILES = (50.0, 90.0, 99.0)
MAX_BUCKETS = 100_000  # rate buckets kept; past this, each covers twice the minutes (a log spanning years)
LONGEST = 2**62  # the largest length a histogram keeps (a body may ask for any max_tokens)


def lengths() -> HdrHistogram:
    return HdrHistogram(1, LONGEST, 3)


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
    def estimated(self) -> bool:
        """Whether `count` is an estimate (more than KMV distinct keys)."""
        return len(self._heap) >= KMV

    @property
    def count(self) -> int:
        if not self.estimated:
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
    per_bucket: Counter[int] = field(default_factory=Counter)  # requests per `bucket_minutes`, by its first minute
    bucket_minutes: int = 1
    langs: Counter[str] = field(default_factory=Counter)
    assigned: int = 0  # requests whose language the mix gave
    apis: Counter[str] = field(default_factory=Counter)
    users: Distinct = field(default_factory=Distinct)
    sessions: Distinct = field(default_factory=Distinct)
    input_tokens: HdrHistogram = field(default_factory=lengths)
    output_tokens: HdrHistogram = field(default_factory=lengths)

    def add(self, rec: LogRecord) -> None:
        self.requests += 1
        self.first = rec.offset if self.first is None else self.first
        self.last = rec.offset
        self._count_minute(int(rec.offset // 60))
        if rec.lang is None:
            self.assigned += 1
        self.langs[rec.lang or self.mix.pick(rec.user, self.seed)] += 1
        self.apis[rec.api or "(--api)"] += 1
        self.users.add(rec.user)
        if rec.session is not None:
            self.sessions.add(rec.session)
        n = rec.input_tokens if rec.input_tokens is not None else tokenizer.count(body_text(rec.body or {}))
        self.input_tokens.record_value(min(max(n, 1), LONGEST))
        out = rec.output_tokens if rec.output_tokens is not None else _max_tokens(rec.body or {})
        if out is not None:
            self.output_tokens.record_value(min(max(out, 1), LONGEST))

    def _count_minute(self, minute: int) -> None:
        self.per_bucket[minute - minute % self.bucket_minutes] += 1
        if len(self.per_bucket) > MAX_BUCKETS:
            self.bucket_minutes *= 2
            coarser: Counter[int] = Counter()
            for m, n in self.per_bucket.items():
                coarser[m - m % self.bucket_minutes] += n
            self.per_bucket = coarser

    def to_json(self, problems: Problems) -> dict[str, Any]:
        span = self.last - (self.first or 0.0)
        return {
            "requests": self.requests,
            "duration_s": round(span, 3),
            "rate_per_s": round(self.requests / span, 3) if span > 0 else None,
            "per_minute": [[m, n] for m, n in sorted(self.per_bucket.items())],
            "minutes_per_entry": self.bucket_minutes,
            "langs": dict(self.langs.most_common()),
            "langs_assigned": self.assigned,
            "apis": dict(self.apis.most_common()),
            "users": self.users.count,
            "users_estimated": self.users.estimated,
            "sessions": self.sessions.count,
            "sessions_estimated": self.sessions.estimated,
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


def _quantiles(h: HdrHistogram) -> dict[str, int]:
    if not h.get_total_count():
        return {}
    return {**{f"p{q:g}": h.get_value_at_percentile(q) for q in QUANTILES}, "max": h.get_max_value()}


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
    lines += _rate_rows(data["per_minute"], data["minutes_per_entry"], data["duration_s"])
    total = max(data["requests"], 1)
    mix = " ".join(f"{k} {100 * v / total:.1f}%" for k, v in data["langs"].items())
    assigned = f" ({data['langs_assigned']} assigned by the mix)" if data["langs_assigned"] else ""
    lines.append(f"languages: {mix}{assigned}")
    lines.append("apis: " + " ".join(f"{k} {v}" for k, v in data["apis"].items()))
    users, sessions = (("~" if data[f"{k}_estimated"] else "") + str(data[k]) for k in ("users", "sessions"))
    estimated = " (~: estimated, past a thousand)" if "~" in users + sessions else ""
    lines.append(f"users: {users}  sessions: {sessions}{estimated}")
    for name in ("input_tokens", "output_tokens"):
        lines.append(f"{name}: " + " ".join(f"{k} {v}" for k, v in data[name].items()))
    lines += ["skipped: " + line for line in _problem_lines(data["problems"])]
    return "\n".join(lines)


def _rate_rows(per: list[list[int]], width: int, span_s: float) -> list[str]:
    """Requests per second in up to ROWS rows, each over the seconds of the log it covers (the last
    row's part of a minute is its own, not a whole minute)."""
    if not per:
        return []
    minutes = per[-1][0] + width
    step = width * max(1, math.ceil(minutes / width / ROWS))
    rows: Counter[int] = Counter()
    for m, n in per:
        rows[m // step] += n
    peak = max(n / min(step * 60, max(span_s, 1e-9)) for n in rows.values())
    out = [f"rate over time (requests/s, {step} min a row):"]
    for i in range(max(rows) + 1):
        n, start = rows[i], i * step * 60
        seconds = min(step * 60.0, span_s - start)
        label = f"  {start // 3600:3d}h{start % 3600 // 60:02d}m"
        if seconds <= 0:  # the log's last instant opens this row
            out.append(f"{label} {n:6d} at its last instant")
            continue
        rate = n / seconds
        part = f" (over {seconds:.0f}s)" if seconds < step * 60 else ""
        out.append(f"{label} {n:6d} {rate:9.2f} {'#' * round(40 * rate / peak)}{part}")
    return out


def _problem_lines(data: dict[str, Any]) -> list[str]:
    p = Problems(data["file"])
    p.merge(data)
    return p.lines()
