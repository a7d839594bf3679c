"""BurstGPT traces (HPMLL/BurstGPT): CSV `Timestamp` (seconds from the trace's start), `Model`,
`Request tokens`, `Response tokens`, `Total tokens`, `Log Type`. No users: each request is its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from loadtests.logs import fields as f
from loadtests.logs.lines import Row, csv_rows
from loadtests.logs.record import LogRecord

NAME = "burstgpt"
COLUMNS = {"ts": "Timestamp", "model": "Model", "input_tokens": "Request tokens", "output_tokens": "Response tokens"}


def sniff(header: list[str], cols: dict[str, str]) -> bool:
    c = {**COLUMNS, **cols}
    return c["input_tokens"] in header and c["output_tokens"] in header


def rows(fh: IO[bytes], path: str, cols: dict[str, str]) -> Iterator[Row]:
    c = {**COLUMNS, **cols}

    def parse(row: dict[str, str], line: int) -> LogRecord:
        return LogRecord(
            line,
            f.timestamp(row[c["ts"]], c["ts"]),
            f"r{line}",
            model=row.get(c["model"]) or None,
            input_tokens=f.integer(row[c["input_tokens"]], c["input_tokens"], 1),
            output_tokens=f.integer(row[c["output_tokens"]], c["output_tokens"]),
        )

    return csv_rows(fh, path, (c["ts"], c["input_tokens"], c["output_tokens"]), parse)
