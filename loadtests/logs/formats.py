"""The log formats by name, telling them apart (`auto`), and reading one: every format's records
with the checks they share (a known language and API, no timestamp before the one above it), the
offsets from the log's first record, and the skipped lines counted in a `Problems`."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO

import orjson

from llmchaos import languages
from llmchaos.errors import UsageError
from loadtests.adapters import ADAPTERS
from loadtests.logs import azure, burstgpt, gemini_log, jsonl, mooncake, openai_log
from loadtests.logs.lines import Parsed
from loadtests.logs.log_record import LogRecord
from loadtests.logs.problems import LogProblem, Problems

JSON_FORMATS: tuple[ModuleType, ...] = (jsonl, mooncake, openai_log, gemini_log)  # sniffed in this order
CSV_FORMATS: tuple[ModuleType, ...] = (azure, burstgpt)
FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (*JSON_FORMATS, *CSV_FORMATS)}
NAMES = ("auto", *FORMATS)


@dataclass(frozen=True)
class LogSource:
    """A log file, its format (a name of FORMATS, or auto) and its `--columns` mapping."""

    path: str
    format: str = "auto"
    columns: tuple[tuple[str, str], ...] = ()

    def open(self) -> IO[bytes]:
        try:
            return open(self.path, "rb")  # the caller's with-block closes it
        except OSError as e:
            raise UsageError(e.strerror or str(e), file=self.path) from None

    def module(self) -> ModuleType:
        """The reader of this log, telling the format from its first line when `auto`."""
        if self.format != "auto":
            if self.format not in FORMATS:
                raise UsageError(f"unknown format {self.format!r} (one of: {', '.join(NAMES)})", field="--format")
            return FORMATS[self.format]
        with self.open() as fh:
            head = next((line for line in fh if line.strip()), b"")
        return detect(head, dict(self.columns), self.path)

    def read(self, problems: Problems) -> Iterator[LogRecord]:
        """Stream the log's records, checked, with their offsets (see `checked`)."""
        module = self.module()
        with self.open() as fh:
            yield from checked(module.rows(fh, self.path, dict(self.columns)), problems)


def detect(head: bytes, cols: dict[str, str], path: str) -> ModuleType:
    """The format whose reader claims this first line."""
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
        header = next(csv.reader([head.decode("utf-8-sig", "replace")]), [])
        for m in CSV_FORMATS:
            if m.sniff([h.strip() for h in header], cols):
                return m
    raise UsageError(
        f"cannot tell the format from the first line {head[:80]!r}; give --format", file=path, line=1, field="--format"
    )


def checked(rows: Iterator[Parsed], problems: Problems) -> Iterator[LogRecord]:
    """The records of `rows` whose language and API are known and whose timestamp does not go back,
    each with its offset from the first; every other line counted (or, strict, the first raised)."""
    known_langs, first, last = languages.registry(), None, -float("inf")
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
        yield item


def source(path: str | Path, fmt: str = "auto", columns: dict[str, str] | None = None) -> LogSource:
    return LogSource(str(path), fmt, tuple(sorted((columns or {}).items())))
