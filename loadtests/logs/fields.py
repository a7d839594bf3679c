"""Typed values out of a log line, each a LogProblem naming the field when it is missing or wrong."""

from __future__ import annotations

import math
from typing import Any

import orjson

from loadtests.logs import timestamps
from loadtests.logs.column_map import MISSING, lookup
from loadtests.logs.problems import LogProblem

MAX_TOKENS = 2**21  # a token count beyond this (2,097,152: above any model's context) is no length to replay


def json_object(raw: bytes) -> dict[str, Any]:
    """A JSON Lines line as an object."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise LogProblem("not_json", "line", f"not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise LogProblem("not_json", "line", f"not a JSON object: {type(obj).__name__}")
    return obj


def get(obj: dict[str, Any], path: str, required: bool = True) -> object:
    """The value at `path`; None when absent (a LogProblem if `required`)."""
    value = lookup(obj, path)
    if value is MISSING or value is None:
        if required:
            raise LogProblem("missing_field", path, "missing")
        return None
    return value


def timestamp(value: object, field: str) -> float:
    try:
        return timestamps.seconds(value)
    except ValueError as e:
        raise LogProblem("bad_value", field, str(e)) from None


def integer(value: object, field: str, low: int = 0, high: int = MAX_TOKENS) -> int:
    """A whole number from `low` to `high` (JSON numbers or CSV text; 12.0 is 12)."""
    n: object = value
    if isinstance(value, str):
        try:
            n = float(value)
        except ValueError:
            n = None
    if (
        isinstance(n, bool)
        or not isinstance(n, (int, float))
        or not ((isinstance(n, int) or math.isfinite(n)) and n == int(n) and low <= n <= high)
    ):
        raise LogProblem("bad_value", field, f"must be a whole number from {low} to {high}, got {value!r}")
    return int(n)


def optional_integer(value: object, field: str, low: int = 0, high: int = MAX_TOKENS) -> int | None:
    return None if value is None else integer(value, field, low, high)


def text(value: object, field: str) -> str:
    """An identifier: a string, or a number written as one."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise LogProblem("bad_value", field, f"must be a non-empty string, got {value!r}")


def optional_text(value: object, field: str) -> str | None:
    return None if value is None else text(value, field)


def number(value: object, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    raise LogProblem("bad_value", field, f"must be a number >= 0, got {value!r}")


def hash_ids(value: object, field: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        raise LogProblem("bad_value", field, "must be a list of whole numbers")
    return tuple(value)


def body(value: object, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LogProblem("bad_value", field, f"must be a JSON object (the request body), got {type(value).__name__}")
    return value
