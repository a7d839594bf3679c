"""The one small interface every injector has: check, probe, apply, revert, read back."""

from __future__ import annotations

from typing import ClassVar, Protocol


class FieldError(ValueError):
    """A bad target or params field, named for the schedule's error line."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class InjectError(Exception):
    """A fault could not be applied, reverted or read back; the message is one line."""


class Injector(Protocol):
    kind: ClassVar[str]

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        """Validate a schedule entry without touching anything (FieldError)."""

    def __init__(self, target: dict) -> None: ...

    def probe(self) -> str | None:
        """None when this host can inject the fault, else why not, in one line."""

    def apply(self, name: str, params: dict) -> None:
        """Apply (replace semantics: applying twice leaves one fault)."""

    def revert(self) -> None:
        """Undo; a fault that is already gone counts as reverted."""

    def read_back(self) -> dict:
        """What the target reports now."""


def only_keys(where: str, given: dict, allowed: set[str], required: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    for k in given:
        if k not in allowed:
            raise FieldError(f"{where}.{k}", "unknown field")
    for k in required:
        if k not in given:
            raise FieldError(f"{where}.{k}", "missing")
