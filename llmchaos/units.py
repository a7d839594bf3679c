"""Units in user input: durations such as `500ms`, `30s`, `2m`, `1h`."""

from __future__ import annotations

import re

from llmchaos.errors import UsageError

YEAR_S = 366 * 24 * 3600.0  # the longest offset, duration or period a schedule or a run may name
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*")


def duration(value: object, where: str = "", file: str | None = None, line: int | None = None) -> float:
    """Seconds from '30s', '2m', '150ms', '1h' or a plain number of seconds; a UsageError naming
    `where` (the field) otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        m = _DURATION.fullmatch(str(value))
        if not m:
            raise UsageError(
                f"bad duration {value!r} (use e.g. 500ms, 30s, 2m, 1h)", file=file, line=line, field=where or None
            )
        seconds = float(m.group(1)) * _SECONDS[m.group(2)]
    if seconds < 0:
        raise UsageError(f"negative duration {value!r}", file=file, line=line, field=where or None)
    return seconds
