"""OpenAI-style gateway logs: the body of a chat completion (`messages`) or a completion (`prompt`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loadtests.logs import gateway
from loadtests.logs.lines import Lines, Parsed
from loadtests.logs.problems import LogProblem

NAME = "openai-log"
COLUMNS = gateway.COLUMNS


def api(body: dict[str, Any]) -> str:
    if "messages" in body:
        return "openai-chat"
    if "prompt" in body:
        return "openai-completions"
    raise LogProblem("unknown_api", "body", "an OpenAI body has messages or prompt")


def sniff(obj: dict[str, Any], cols: dict[str, str]) -> bool:
    return gateway.has_body(obj, cols, ("messages", "prompt"))


def rows(lines: Lines, cols: dict[str, str]) -> Iterator[Parsed]:
    return gateway.rows(lines, cols, api, body_user="user", body_lang=("metadata.lang",))
