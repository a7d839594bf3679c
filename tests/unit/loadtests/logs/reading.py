"""Reading a log in a test: every record and the problems counted, or a JSON Lines log written."""

from __future__ import annotations

import json

from loadtests.logs import formats
from loadtests.logs.problems import Problems


def read(path, fmt="auto", columns=None, strict=False):
    problems = Problems(str(path), strict)
    return list(formats.source(path, fmt, columns).read(problems)), problems


def jsonl(tmp_path, rows, name="log.jsonl"):
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return p
