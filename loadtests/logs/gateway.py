"""Request-body logs of API gateways: one JSON object per line with a timestamp and the request body
(and, where the gateway writes them, a user, a session, a language, the response's token count);
`--columns` maps our fields onto the gateway's names (dotted paths)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from loadtests.logs import fields as f
from loadtests.logs.lines import Lines, Parsed, json_lines
from loadtests.logs.log_record import LogRecord

COLUMNS = {
    "ts": "timestamp",
    "user": "user",
    "session": "session_id",
    "lang": "lang",
    "model": "model",
    "body": "body",
    "output_tokens": "output_tokens",
}
Api = Callable[[dict[str, Any]], str]  # the API of a body (a LogProblem when it is none we know)


def rows(
    lines: Lines, cols: dict[str, str], api: Api, body_user: str | None, body_lang: tuple[str, ...]
) -> Iterator[Parsed]:
    """Records of a gateway log; a user absent from the line is the body's `body_user` field, else
    the request is its own user; a language absent from the line is the body's at `body_lang`."""
    c = {**COLUMNS, **cols}

    def parse(obj: dict[str, Any], line: int) -> LogRecord:
        body = f.body(f.get(obj, c["body"]), c["body"])
        user = f.get(obj, c["user"], required=False)
        if user is None and body_user is not None:
            user = body.get(body_user)
        lang = f.get(obj, c["lang"], required=False)
        for path in body_lang:
            lang = lang if lang is not None else f.get(body, path, required=False)
        return LogRecord(
            line,
            f.timestamp(f.get(obj, c["ts"]), c["ts"]),
            f"r{line}" if user is None else f.text(user, c["user"]),
            session=f.optional_text(f.get(obj, c["session"], required=False), c["session"]),
            lang=f.optional_text(lang, c["lang"]),
            api=api(body),
            model=f.optional_text(f.get(obj, c["model"], required=False) or body.get("model"), c["model"]),
            body=body,
            output_tokens=f.optional_integer(f.get(obj, c["output_tokens"], required=False), c["output_tokens"]),
        )

    return json_lines(lines, parse)


def has_body(obj: dict[str, Any], cols: dict[str, str], keys: tuple[str, ...]) -> bool:
    """Whether the line's body (at the mapped column) holds one of `keys`."""
    body = f.get(obj, {**COLUMNS, **cols}["body"], required=False)
    return isinstance(body, dict) and any(k in body for k in keys)
