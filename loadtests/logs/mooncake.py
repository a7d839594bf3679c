"""Mooncake traces (kvcache-ai/Mooncake, FAST '25): JSON Lines of `timestamp` (ms from the trace's
start), `input_length`, `output_length` and `hash_ids`, one id per 512-token prompt block; equal ids
are a shared prefix. Requests whose first block is the same are one user (one prefix family), so a
split keeps a prefix on one side, and with it a conversation: in Mooncake's conversation trace each
turn's ids begin with the turn before's, which makes them one session (logs/conversations.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loadtests.logs import fields as f
from loadtests.logs.lines import Lines, Parsed, json_lines
from loadtests.logs.log_record import LogRecord

NAME = "mooncake"
BLOCK_TOKENS = 512
COLUMNS = {
    "ts": "timestamp",
    "input_tokens": "input_length",
    "output_tokens": "output_length",
    "hash_ids": "hash_ids",
    "user": "user",
    "session": "session_id",
}


def sniff(obj: dict[str, Any], cols: dict[str, str]) -> bool:
    c = {**COLUMNS, **cols}
    return c["input_tokens"] in obj and c["ts"] in obj and "request" not in obj


def rows(lines: Lines, cols: dict[str, str]) -> Iterator[Parsed]:
    c = {**COLUMNS, **cols}

    def parse(obj: dict[str, Any], line: int) -> LogRecord:
        ids = f.hash_ids(f.get(obj, c["hash_ids"], required=False) or [], c["hash_ids"])
        user = f.get(obj, c["user"], required=False)
        return LogRecord(
            line,
            f.timestamp(f.get(obj, c["ts"]), c["ts"]) / 1000.0,
            f.text(user, c["user"]) if user is not None else (f"h{ids[0]}" if ids else f"r{line}"),
            session=f.optional_text(f.get(obj, c["session"], required=False), c["session"]),
            input_tokens=f.integer(f.get(obj, c["input_tokens"]), c["input_tokens"], 1),
            output_tokens=f.integer(f.get(obj, c["output_tokens"]), c["output_tokens"]),
            hash_ids=ids,
            block_tokens=BLOCK_TOKENS,
        )

    return json_lines(lines, parse)
