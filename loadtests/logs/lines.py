"""Streaming a file line by line (JSON Lines) or row by row (CSV), each parsed by a format into a
record or a LogProblem; the file is never loaded whole."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from typing import IO, Any

from llmchaos.errors import UsageError
from loadtests.logs.fields import json_object
from loadtests.logs.log_record import LogRecord
from loadtests.logs.problems import LogProblem

Parsed = tuple[int, LogRecord | LogProblem]


def json_lines(f: IO[bytes], parse: Callable[[dict[str, Any], int], LogRecord]) -> Iterator[Parsed]:
    """Each non-blank line as an object, parsed by `parse(obj, line)`."""
    for n, raw in enumerate(f, start=1):
        if not raw.strip():
            continue
        try:
            yield n, parse(json_object(raw), n)
        except LogProblem as p:
            yield n, p


def csv_rows(
    f: IO[bytes], path: str, need: tuple[str, ...], parse: Callable[[dict[str, str], int], LogRecord]
) -> Iterator[Parsed]:
    """Each row after the header as {header: value}, parsed by `parse(row, line)`. A header without
    every column in `need` is a UsageError (nothing of the file can be read)."""
    text = io.TextIOWrapper(f, encoding="utf-8-sig", errors="replace", newline="")
    reader = csv.reader(text)
    try:
        header = [h.strip() for h in next(reader)]
    except (StopIteration, csv.Error) as e:
        raise UsageError(f"no CSV header: {e or 'empty file'}", file=path, line=1, field="header") from None
    if missing := [c for c in need if c not in header]:
        raise UsageError(
            f"CSV header lacks {', '.join(missing)} (has: {', '.join(header)[:200]})", file=path, line=1, field="header"
        )
    while True:
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield reader.line_num, LogProblem("bad_row", "row", f"not CSV: {e}")
            continue
        n = reader.line_num
        if not values or not any(v.strip() for v in values):
            continue
        if len(values) != len(header):
            yield n, LogProblem("bad_row", "row", f"{len(values)} columns, the header has {len(header)}")
            continue
        try:
            yield n, parse(dict(zip(header, values, strict=True)), n)
        except LogProblem as p:
            yield n, p
