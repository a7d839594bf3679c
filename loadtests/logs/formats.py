"""The log formats by name, telling them apart (`auto`), and reading one: every format's records
with the checks they share (a known language and API, no timestamp before the one above it), the
offsets from the log's first record, each one's place in its conversation, and the skipped lines
counted in a `Problems`."""

from __future__ import annotations

import contextlib
import csv
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import orjson

from llmchaos import languages
from llmchaos.errors import UsageError
from loadtests.adapters import ADAPTERS
from loadtests.logs import azure, burstgpt, gemini_log, jsonl, mooncake, openai_log
from loadtests.logs.conversations import Conversations
from loadtests.logs.flags import NAMES
from loadtests.logs.lines import MAX_LINE_BYTES, Lines, Parsed, opened
from loadtests.logs.log_record import LogRecord
from loadtests.logs.problems import LogProblem, Problems

JSON_FORMATS: tuple[ModuleType, ...] = (jsonl, mooncake, openai_log, gemini_log)  # sniffed in this order
CSV_FORMATS: tuple[ModuleType, ...] = (azure, burstgpt)
FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (*JSON_FORMATS, *CSV_FORMATS)}
QUOTED = 200  # bytes of a first line quoted when it tells no format


class Reading(NamedTuple):
    """An open log: its reader (the format) and its records, checked, as they are read."""

    module: ModuleType
    records: Iterator[LogRecord]


@dataclass(frozen=True)
class LogSource:
    """A log file, its format (a name of FORMATS, or auto), its `--columns` mapping and the longest
    line it may have (`--max-line-bytes`)."""

    path: str
    format: str = "auto"
    columns: tuple[tuple[str, str], ...] = ()
    max_line: int = MAX_LINE_BYTES

    def module(self, lines: Lines | None = None) -> ModuleType:
        """The reader of this log, telling the format from its first line when `auto` (the open
        file's `lines`, else the file opened for it)."""
        if self.format != "auto":
            if self.format not in FORMATS:
                raise UsageError(f"unknown format {self.format!r} (one of: {', '.join(NAMES)})", field="--format")
            return FORMATS[self.format]
        if lines is not None:
            return detect(lines, dict(self.columns))
        with opened(self.path, self.max_line) as fresh:
            return detect(fresh, dict(self.columns))

    @contextlib.contextmanager
    def opened(self, problems: Problems) -> Iterator[Reading]:
        """The log opened once (a pipe too): its format and its records (see `checked`)."""
        with opened(self.path, self.max_line) as lines:
            module = self.module(lines)
            yield Reading(module, checked(module.rows(lines, dict(self.columns)), problems))

    def read(self, problems: Problems) -> Iterator[LogRecord]:
        """Stream the log's records, checked, with their offsets (see `checked`)."""
        with self.opened(problems) as log:
            yield from log.records

    def rereadable(self, flag: str) -> None:
        """A UsageError naming `flag` unless the log is a regular file (a replay reads it more than
        once: on the master, on each worker, once per --loop pass)."""
        try:
            regular = stat.S_ISREG(os.stat(self.path).st_mode)
        except OSError as e:
            raise UsageError(e.strerror or str(e), file=self.path, field=flag) from None
        if not regular:
            raise UsageError(
                "not a regular file (a pipe?): a replay reads its log more than once (the master, each worker, "
                "each --loop pass); write it to a file first",
                file=self.path,
                field=flag,
            )


def detect(lines: Lines, cols: dict[str, str]) -> ModuleType:
    """The format whose reader claims the file's first line."""
    first = lines.head()
    if first is None:
        raise UsageError("empty: no line to tell the format from; give --format", file=lines.path, field="--format")
    n, head = first
    if head is None:
        raise UsageError(
            f"cannot tell the format: the first line is longer than {lines.limit} bytes (--max-line-bytes)",
            file=lines.path,
            line=n,
            field="--format",
        )
    if head.lstrip().startswith(b"{"):
        try:
            obj = orjson.loads(head)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            for m in JSON_FORMATS:
                if m.sniff(obj, cols):
                    return m
    else:
        try:
            header = next(csv.reader([head.decode("utf-8-sig", "replace")]), [])
        except csv.Error:
            header = []
        for m in CSV_FORMATS:
            if m.sniff([h.strip() for h in header], cols):
                return m
    shown = head.rstrip(b"\r\n")
    quoted = repr(shown[:QUOTED]) + (f" ... ({len(shown)} bytes)" if len(shown) > QUOTED else "")
    raise UsageError(
        f"cannot tell the format from the first line {quoted}; give --format", file=lines.path, line=n, field="--format"
    )


def checked(rows: Iterator[Parsed], problems: Problems) -> Iterator[LogRecord]:
    """The records of `rows` whose language and API are known and whose timestamp does not go back,
    each with its offset from the first and its session and turn (logs/conversations.py); every other
    line counted (or, strict, the first raised)."""
    known_langs, first, last = languages.registry(), None, -float("inf")
    conversations = Conversations()
    for line, item in rows:
        try:
            if isinstance(item, LogProblem):
                raise item
            if item.lang is not None and item.lang not in known_langs:
                raise LogProblem("unknown_lang", "lang", f"unknown language {item.lang!r}")
            if item.api is not None and item.api not in ADAPTERS:
                raise LogProblem("unknown_api", "api", f"unknown API {item.api!r} (known: {', '.join(ADAPTERS)})")
            if item.ts < last:
                raise LogProblem("backwards", "ts", f"goes back {last - item.ts:.6g}s from the line before")
        except LogProblem as p:
            problems.add(line, p)
            continue
        if first is None:
            first = item.ts
        last = item.ts
        item.offset = item.ts - first
        conversations.place(item)
        yield item


def source(
    path: str | Path, fmt: str = "auto", columns: dict[str, str] | None = None, max_line: int = MAX_LINE_BYTES
) -> LogSource:
    return LogSource(str(path), fmt, tuple(sorted((columns or {}).items())), max_line)
