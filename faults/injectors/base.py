"""The one small interface every injector has: check, probe, apply, revert, read back."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Set
from typing import ClassVar, Protocol

from faults.allow import Allowlist, is_name
from llmchaos.errors import UsageError
from llmchaos.units import duration


class FieldError(ValueError):
    """A bad target or params field, named for the schedule's error line."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class InjectError(Exception):
    """A fault could not be applied, reverted or read back; the message is one line."""


class TargetGone(InjectError):
    """The target itself no longer exists (its network namespace, interface, container or server):
    whatever was applied to it went with it, so there is nothing left to revert."""


class Injector(Protocol):
    """A fault on one target. `save` reads what `revert` needs before anything changes; the runner
    writes it to the journal, then applies, so a later `llmchaos faults recover` can revert from
    the journal alone."""

    kind: ClassVar[str]
    aimed: ClassVar[bool]  # takes a `direction` and a `match` (injectors/aim.py) with its params

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        """Validate a schedule entry without touching anything (FieldError)."""

    @classmethod
    def probe_host(cls) -> str | None:
        """None when this host can inject this kind at all, else why not, in one line."""

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None: ...

    def probe(self, params: dict | None = None) -> str | None:
        """None when this target can take the fault (reachable, allowed), else why not, in one line;
        with `params`, FieldError when this target cannot take those (a clock outside its range)."""

    def save(self, params: dict) -> dict:
        """The state `revert` restores (JSON), read before `apply` changes it."""

    def apply(self, name: str, params: dict, saved: dict) -> dict | None:
        """Apply (replace semantics: applying twice leaves one fault). May return more for `saved`
        (what the target read back with the fault on), which the runner journals and reverts with."""

    def revert(self, saved: dict) -> None:
        """Undo, and return only once the target reads back as restored; a fault that is already
        gone counts as reverted; TargetGone when the target itself no longer exists."""

    def read_back(self) -> dict:
        """What the target reports now."""


def only_keys(where: str, given: dict, allowed: Set[str], required: Set[str] = frozenset()) -> None:
    for k in given:
        if k not in allowed:
            raise FieldError(f"{where}.{k}", "unknown field")
    for k in required:
        if k not in given:
            raise FieldError(f"{where}.{k}", "missing")


def choice(params: dict, key: str, choices: Collection[str]) -> str:
    """params[key], one of `choices` (any other value, of any type, a FieldError naming them)."""
    value = params[key]
    if not isinstance(value, str) or value not in choices:
        raise FieldError(f"params.{key}", f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def number(params: dict, key: str, unit: str = "", most: float = math.inf) -> float:
    """A finite non-negative number up to `most`, or a string with a unit suffix stripped (`100ms`, `0.5%`)."""
    value = params[key]
    if isinstance(value, str) and unit and value.endswith(unit):
        value = value[: -len(unit)]
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError
        v = float(value)
    except (TypeError, ValueError):
        expected = f"a number in {unit}" if unit else "a number"
        raise FieldError(f"params.{key}", f"expected {expected}, got {params[key]!r}") from None
    if not math.isfinite(v):
        raise FieldError(f"params.{key}", "must be finite")
    if v < 0:
        raise FieldError(f"params.{key}", "must not be negative")
    if v > most:
        raise FieldError(f"params.{key}", f"at most {most:g}{unit}")
    return v


def millis(params: dict, key: str, most: float = math.inf) -> float:
    """A time in milliseconds up to `most`: a number (ms), or a duration with its unit (`100ms`, `1s`),
    as the schedule's own times are written."""
    value = params[key]
    if isinstance(value, str) and value.strip()[-1:].isalpha() and not value.strip().endswith("ms"):
        try:
            value = duration(value) * 1000
        except UsageError:
            raise FieldError(f"params.{key}", f"expected a time such as 100ms or 1s, got {value!r}") from None
    return number({key: value}, key, "ms", most)


RATE = re.compile(r"(\d{1,12}(?:\.\d{1,6})?)(bit|kbit|mbit|gbit)")
BITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}  # tc's units, as tbf and netem read them
U32 = 2**32 - 1
MAX_RATE_BIT = 8 * U32  # tc's rate fields hold bytes a second in 32 bits (about 34.4gbit)


def rate(params: dict, key: str) -> str:
    """A bandwidth the way tc writes it (`8mbit`, `1.5mbit`), as whole bits a second (`1500000bit`):
    pyroute2 reads an integer before the unit."""
    m = RATE.fullmatch(params[key]) if isinstance(params[key], str) else None
    if m is None:
        raise FieldError(f"params.{key}", f"expected e.g. 8mbit, got {params[key]!r}")
    if float(m.group(1)) == 0:
        raise FieldError(f"params.{key}", "must be positive")
    bits = round(float(m.group(1)) * BITS[m.group(2)])
    if not 8 <= bits <= MAX_RATE_BIT:
        raise FieldError(
            f"params.{key}", f"must be from 8bit (a byte a second) to {MAX_RATE_BIT}bit, got {params[key]!r}"
        )
    return f"{bits}bit"


def word(target: dict, key: str, what: str) -> str:
    """A name such as an interface or a network namespace: a string without '/' or spaces."""
    value = target[key]
    if not is_name(value) or value in (".", ".."):
        raise FieldError(f"target.{key}", f"must be {what} (a name without '/' or spaces), got {value!r}")
    return value
