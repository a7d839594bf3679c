"""BurstGPT traces (HPMLL/BurstGPT): CSV `Timestamp` (seconds from the trace's start), `Model`,
`Request tokens`, `Response tokens`, `Total tokens`, `Log Type`. No users: each request is its own."""

from __future__ import annotations

from collections.abc import Iterator

from loadtests.logs import token_csv
from loadtests.logs.lines import Lines, Parsed

NAME = "burstgpt"
COLUMNS = {"ts": "Timestamp", "model": "Model", "input_tokens": "Request tokens", "output_tokens": "Response tokens"}


def sniff(header: list[str], cols: dict[str, str]) -> bool:
    return token_csv.sniff(header, {**COLUMNS, **cols})


def rows(lines: Lines, cols: dict[str, str]) -> Iterator[Parsed]:
    return token_csv.rows(lines, {**COLUMNS, **cols})
