"""Azure LLM inference traces (Azure/AzurePublicDataset, 2023 and 2024): CSV
`TIMESTAMP,ContextTokens,GeneratedTokens`, date-times such as `2023-11-16 18:15:46.6805900`. No users:
each request is its own."""

from __future__ import annotations

from collections.abc import Iterator

from loadtests.logs import token_csv
from loadtests.logs.lines import Lines, Parsed

NAME = "azure"
COLUMNS = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}


def sniff(header: list[str], cols: dict[str, str]) -> bool:
    return token_csv.sniff(header, {**COLUMNS, **cols})


def rows(lines: Lines, cols: dict[str, str]) -> Iterator[Parsed]:
    return token_csv.rows(lines, {**COLUMNS, **cols})
