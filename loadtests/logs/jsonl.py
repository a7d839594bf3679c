"""Our own recorded-log format (DESIGN, Recorded logs): JSON Lines with `ts` (RFC 3339 or epoch
seconds), `user_id`, optional `session_id`, `lang`, `api`, `model`, `request` (the request body) and
`response` (status, ttft_ms, e2e_ms, output_tokens). A line without `request` carries a trace's
token counts instead: `input_tokens`, optional `output_tokens` and `hash_ids` (`block_tokens` each)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loadtests.logs import fields as f
from loadtests.logs.lines import Lines, Parsed, json_lines
from loadtests.logs.log_record import LogRecord, Recorded
from loadtests.logs.problems import LogProblem

NAME = "llmchaos"
COLUMNS = {
    "ts": "ts",
    "user": "user_id",
    "session": "session_id",
    "lang": "lang",
    "api": "api",
    "model": "model",
    "body": "request",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "hash_ids": "hash_ids",
}


def sniff(obj: dict[str, Any], cols: dict[str, str]) -> bool:
    return "ts" in obj and "user_id" in obj


def rows(lines: Lines, cols: dict[str, str]) -> Iterator[Parsed]:
    c = {**COLUMNS, **cols}

    def parse(obj: dict[str, Any], line: int) -> LogRecord:
        body = f.get(obj, c["body"], required=False)
        response = _response(f.get(obj, "response", required=False))
        out = f.optional_integer(f.get(obj, c["output_tokens"], required=False), c["output_tokens"])
        return LogRecord(
            line,
            f.timestamp(f.get(obj, c["ts"]), c["ts"]),
            f.text(f.get(obj, c["user"]), c["user"]),
            session=f.optional_text(f.get(obj, c["session"], required=False), c["session"]),
            lang=f.optional_text(f.get(obj, c["lang"], required=False), c["lang"]),
            api=f.optional_text(f.get(obj, c["api"], required=False), c["api"]),
            model=f.optional_text(f.get(obj, c["model"], required=False), c["model"]),
            body=None if body is None else f.body(body, c["body"]),
            input_tokens=None if body is not None else f.integer(f.get(obj, c["input_tokens"]), c["input_tokens"], 1),
            output_tokens=out if out is not None else (response.output_tokens if response else None),
            hash_ids=f.hash_ids(obj.get(c["hash_ids"], []), c["hash_ids"]),
            block_tokens=f.integer(obj.get("block_tokens", 512), "block_tokens", 1),
            response=response,
        )

    return json_lines(lines, parse)


def _response(value: object) -> Recorded | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise LogProblem("bad_value", "response", "must be a JSON object")
    return Recorded(
        f.optional_integer(value.get("status"), "response.status", 100, 999),
        f.number(value.get("ttft_ms"), "response.ttft_ms"),
        f.number(value.get("e2e_ms"), "response.e2e_ms"),
        f.optional_integer(value.get("output_tokens"), "response.output_tokens"),
    )
