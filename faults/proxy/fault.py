"""What a fault window does to the streams that start while it is active, checked field by field
(the control API's PUT and a schedule's `sse` params both come through `SSEFault.from_json`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TypeVar

from llmchaos.errors import UsageError
from llmchaos.languages import registry
from llmchaos.units import duration

STATUSES = (429, 500, 502, 503, 504)
T = TypeVar("T")


class FaultError(ValueError):
    """A bad field, named in `field`; the message starts with the field's name."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.field = name


def _bad(name: str, problem: str) -> FaultError:
    return FaultError(name, f"{name} {problem}")


def _number(value: object) -> float:
    """The value as a float; NaN when it is not a number, so that every range check refuses it."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _name(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(name, "must be a non-empty string")
    return value


def _ratio(name: str, value: object) -> float:
    if not 0.0 <= (number := _number(value)) <= 1.0:
        raise _bad(name, "must be within [0, 1]")
    return number


def _non_negative(name: str, number: float, unit: str) -> float:
    if not math.isfinite(number):
        raise _bad(name, f"must be a finite number{unit}")
    if number < 0:
        raise _bad(name, "must not be negative")
    return number


def _seconds(name: str, value: object) -> float:
    """A number of seconds, or a duration as schedules write them (`300ms`, `0s`)."""
    if not isinstance(value, str):
        return _non_negative(name, _number(value), " of seconds")
    try:
        return _non_negative(name, duration(value), " of seconds")
    except UsageError:
        raise _bad(name, "must be a finite number of seconds (or e.g. 300ms)") from None


def _rate(name: str, value: object) -> float:
    return _non_negative(name, _number(value), " of bytes per second")


def _whole(unit: str) -> Callable[[str, object], int]:
    def check(name: str, value: object) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _bad(name, f"must be a whole number{unit}")
        if value < 0:
            raise _bad(name, "must not be negative")
        return value

    return check


def _status(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value not in STATUSES:
        raise _bad(name, f"must be one of {', '.join(map(str, STATUSES))}")
    return value


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _bad(name, "must be true or false")
    return value


def _langs(name: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise _bad(name, "must be a list of language tags")
    known = registry()
    for tag in value:
        if tag not in known:
            raise _bad(name, f"has an unknown language {tag!r} (known: {', '.join(known)})")
    return list(value)


def _seed(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(name, "must be an integer")
    return value


def _field(default: T, check: Callable[[str, object], T]) -> T:
    """A field with a default and the check `from_json` runs on a given value."""
    return field(default=default, metadata={"check": check})


@dataclass
class SSEFault:
    """Times are seconds. An event's release: max(its arrival + first_event_delay, the stream's
    start + hold), plus uniform(0, jitter), never before the one ahead of it, then paced by bandwidth."""

    name: str = _field("sse", _name)
    drop_ratio: float = _field(0.0, _ratio)  # drop this fraction of content events (seeded)
    corrupt_ratio: float = _field(0.0, _ratio)  # replace this fraction of content events' text with garbage (seeded)
    first_event_delay: float = _field(0.0, _seconds)  # every event this much later (a slow prefill)
    hold: float = _field(0.0, _seconds)  # events wait this long from the stream's start, then go at once
    jitter: float = _field(0.0, _seconds)  # each event a further uniform(0, jitter) later, order kept
    cut_after: int = _field(0, _whole(""))  # end the stream after this many events (0: never)
    reset: bool = _field(False, _flag)  # with cut_after: reset the connection instead of ending the stream
    bandwidth: float = _field(0.0, _rate)  # bytes per second per stream (0: unlimited)
    error_ratio: float = _field(0.0, _ratio)  # answer this fraction of requests with error_status
    error_status: int = _field(429, _status)
    retry_after: int = _field(1, _whole(" of seconds"))
    langs: list[str] = field(default_factory=list, metadata={"check": _langs})  # only these (empty: all)
    seed: int = _field(0, _seed)

    @classmethod
    def from_json(cls, data: object) -> SSEFault:
        """The fault `data` describes; a FaultError naming the first bad field otherwise."""
        if not isinstance(data, dict):
            raise ValueError("a fault is a JSON object")
        checks = {f.name: f.metadata["check"] for f in fields(cls)}
        for name in data:
            if name not in checks:
                raise FaultError(name, f"unknown field {name!r}")
        fault = cls(**{name: checks[name](name, value) for name, value in data.items()})
        if fault.reset and not fault.cut_after:
            raise _bad("reset", "needs cut_after (the event count to reset after)")
        return fault

    def applies_to(self, lang: str | None) -> bool:
        return not self.langs or lang in self.langs
