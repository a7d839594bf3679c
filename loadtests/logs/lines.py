"""A log file read once, line by line: gzip read transparently (by its magic bytes or a `.gz` name),
every line bounded (`--max-line-bytes`: a longer one is skipped to its end and counted, never held),
the first line kept for telling the format, then each line parsed by a format into a record or a
LogProblem (JSON Lines) or each CSV row. A pipe works as a file does: nothing is read twice."""

from __future__ import annotations

import contextlib
import csv
import gzip
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any

from llmchaos.errors import UsageError
from loadtests.logs.fields import json_object
from loadtests.logs.flags import MAX_LINE_BYTES
from loadtests.logs.log_record import LogRecord
from loadtests.logs.problems import LogProblem

Parsed = tuple[int, LogRecord | LogProblem]
GZIP_MAGIC = b"\x1f\x8b"
SKIP = 2**16  # bytes read at a time past the end of a line too long to keep
UNREADABLE = (OSError, EOFError, zlib.error)  # a truncated or corrupt gzip stream, a read error


class Lines:
    """The lines of one open log, numbered from 1: (n, bytes) each, (n, None) for a line longer than
    `limit` bytes (its newline not counted). `head()` is the first non-blank line, read ahead and
    handed out again by the iteration."""

    def __init__(self, fh: IO[bytes], path: str, limit: int = MAX_LINE_BYTES) -> None:
        self.fh, self.path, self.limit = fh, path, limit
        self._ahead: list[tuple[int, bytes | None]] = []
        self._n = 0

    def _next(self) -> tuple[int, bytes | None] | None:
        try:
            raw = self.fh.readline(self.limit + 1)
            if not raw:
                return None
            self._n += 1
            if len(raw) > self.limit and not raw.endswith(b"\n"):
                while (rest := self.fh.readline(SKIP)) and not rest.endswith(b"\n"):
                    pass
                return self._n, None
        except UNREADABLE as e:
            raise UsageError(f"unreadable: {e}", file=self.path, line=self._n + 1) from None
        return self._n, raw

    def head(self) -> tuple[int, bytes | None] | None:
        """The first line that is not blank (None: the file has none), without consuming it."""
        while True:
            if self._ahead and (self._ahead[-1][1] is None or self._ahead[-1][1].strip()):
                return self._ahead[-1]
            got = self._next()
            if got is None:
                return None
            self._ahead.append(got)

    def __iter__(self) -> Iterator[tuple[int, bytes | None]]:
        while self._ahead:
            yield self._ahead.pop(0)
        while (got := self._next()) is not None:
            yield got

    def too_long(self) -> LogProblem:
        return LogProblem("too_long", "line", f"longer than {self.limit} bytes (--max-line-bytes)")


@contextlib.contextmanager
def opened(path: str, limit: int = MAX_LINE_BYTES) -> Iterator[Lines]:
    """The file's lines, decompressed when it is gzip (its magic bytes, or a .gz name)."""
    with contextlib.ExitStack() as stack:
        try:
            raw = stack.enter_context(open(path, "rb"))
            magic = raw.peek(2)[:2]  # a BufferedReader peeks a pipe too
        except OSError as e:
            raise UsageError(e.strerror or str(e), file=path) from None
        fh: IO[bytes] = raw
        if magic == GZIP_MAGIC or path.endswith(".gz"):
            fh = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))  # type: ignore[arg-type]  # IO enough
        yield Lines(fh, path, limit)


def json_lines(lines: Lines, parse: Callable[[dict[str, Any], int], LogRecord]) -> Iterator[Parsed]:
    """Each non-blank line as an object, parsed by `parse(obj, line)`."""
    for n, raw in lines:
        if raw is None:
            yield n, lines.too_long()
            continue
        if not raw.strip():
            continue
        try:
            yield n, parse(json_object(raw), n)
        except LogProblem as p:
            yield n, p


def csv_rows(
    lines: Lines, need: tuple[str, ...], parse: Callable[[dict[str, str], int], LogRecord]
) -> Iterator[Parsed]:
    """Each row after the header as {header: value}, parsed by `parse(row, line)`. A header without
    every column in `need` is a UsageError (nothing of the file can be read); a line too long to keep
    reads as a blank one and is counted."""
    too_long: list[int] = []

    def text() -> Iterator[str]:
        for n, raw in lines:
            if raw is None:
                too_long.append(n)
                yield "\n"
            else:
                yield raw.decode("utf-8-sig" if n == 1 else "utf-8", "replace")

    reader = csv.reader(text())
    path = lines.path
    try:
        header = [h.strip() for h in next(reader)]
    except (StopIteration, csv.Error) as e:
        raise UsageError(f"no CSV header: {e or 'empty file'}", file=path, line=1, field="header") from None
    if too_long:
        raise UsageError(f"a header longer than {lines.limit} bytes", file=path, line=1, field="header")
    if missing := [c for c in need if c not in header]:
        raise UsageError(
            f"CSV header lacks {', '.join(missing)} (has: {', '.join(header)[:200]})", file=path, line=1, field="header"
        )
    while True:
        try:
            values = next(reader)
        except StopIteration:
            yield from ((n, lines.too_long()) for n in too_long)
            return
        except csv.Error as e:
            yield reader.line_num, LogProblem("bad_row", "row", f"not CSV: {e}")
            continue
        while too_long:
            yield too_long.pop(0), lines.too_long()
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
