"""Gemini-style gateway logs: the body of a generateContent call (`contents`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loadtests.logs import gateway
from loadtests.logs.lines import Lines, Parsed
from loadtests.logs.problems import LogProblem

NAME = "gemini-log"
COLUMNS = gateway.COLUMNS


def api(body: dict[str, Any]) -> str:
    if "contents" in body:
        return "gemini"
    raise LogProblem("unknown_api", "body", "a Gemini body has contents")


def sniff(obj: dict[str, Any], cols: dict[str, str]) -> bool:
    return gateway.has_body(obj, cols, ("contents",))


def rows(lines: Lines, cols: dict[str, str]) -> Iterator[Parsed]:
    return gateway.rows(lines, cols, api, body_user=None, body_lang=("labels.lang",))
