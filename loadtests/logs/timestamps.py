"""Timestamps as logs write them: epoch seconds, or RFC 3339 / ISO 8601 date-times with a 'T' or a
space, any number of fractional digits (Azure writes seven), 'Z' or an offset (none: UTC)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

MAX_ABS = 1e13  # seconds (or a trace's ms): beyond any date a log was written on, read as ms or s
_ISO = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:\.(\d+))?\s*(Z|[+-]\d\d:?\d\d)?", re.IGNORECASE)


def seconds(value: object) -> float:
    """Epoch (or trace-relative) seconds; ValueError when `value` is neither a finite number within
    MAX_ABS nor a date-time."""
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, (int, float)):
        t = float(value)
    elif isinstance(value, str):
        t = _text(value.strip())
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    if not math.isfinite(t):
        raise ValueError(f"not a finite timestamp: {value!r}")
    if abs(t) > MAX_ABS:
        raise ValueError(f"not a timestamp: {value!r} is beyond {MAX_ABS:g} (epoch seconds, or a trace's ms)")
    return t


def _text(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        pass
    m = _ISO.fullmatch(s)
    if not m:
        raise ValueError(f"not a timestamp: {s!r} (epoch seconds or RFC 3339)")
    day, clock, frac, zone = m.groups()
    zone = "+00:00" if zone is None or zone.upper() == "Z" else zone
    try:
        dt = datetime.fromisoformat(f"{day}T{clock}{zone}").astimezone(UTC)
    except ValueError as e:
        raise ValueError(f"not a timestamp: {s!r} ({e})") from None
    return dt.timestamp() + (float("0." + frac) if frac else 0.0)


def iso(t: float) -> str:
    """Epoch seconds as RFC 3339 in UTC, to the microsecond."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
