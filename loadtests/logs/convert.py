"""`llmchaos logs convert`: any log or trace as our JSONL (DESIGN, Recorded logs), line by line. What
the source lacks stays absent (a trace's language, API and body): the replay fills them in the
same way from either file."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict
from typing import Any

import orjson

from loadtests.logs.log_record import LogRecord


def line(rec: LogRecord) -> dict[str, Any]:
    """A record as one line of our format."""
    out: dict[str, Any] = {"ts": rec.ts, "user_id": rec.user}
    optional = {"session_id": rec.session, "lang": rec.lang, "api": rec.api, "model": rec.model}
    out |= {k: v for k, v in optional.items() if v is not None}
    if rec.body is not None:
        out["request"] = rec.body
        if rec.output_tokens is not None and (rec.response is None or rec.response.output_tokens is None):
            out["output_tokens"] = rec.output_tokens
    else:
        out |= {"input_tokens": rec.input_tokens, "output_tokens": rec.output_tokens}
        if rec.hash_ids:
            out |= {"hash_ids": list(rec.hash_ids), "block_tokens": rec.block_tokens}
    if rec.response is not None:
        out["response"] = {k: v for k, v in asdict(rec.response).items() if v is not None}
    return out


def encoded(records: Iterable[LogRecord]) -> Iterator[bytes]:
    """Each record as a line of our format, newline included."""
    for rec in records:
        yield orjson.dumps(line(rec)) + b"\n"
