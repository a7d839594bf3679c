"""Reading a log in a test: every record and the problems counted, or a JSON Lines log written."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

from loadtests.logs import formats
from loadtests.logs import jsonl as our_format
from loadtests.logs.lines import Lines
from loadtests.logs.log_record import LogRecord
from loadtests.logs.problems import Problems


def read(path, fmt="auto", columns=None, strict=False):
    problems = Problems(str(path), strict)
    return list(formats.source(path, fmt, columns).read(problems)), problems


def text(rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def jsonl(tmp_path, rows, name="log.jsonl"):
    p = tmp_path / name
    p.write_text(text(rows), encoding="utf-8")
    return p


def records(rows, problems: Problems | None = None) -> Iterator[LogRecord]:
    """Our JSON Lines format's records of `rows`, checked, read from memory."""
    lines = Lines(io.BytesIO(text(rows).encode()), "log")
    return formats.checked(our_format.rows(lines, {}), problems or Problems("log"))
