"""k8s.io/apimachinery's field errors (v0.28, the version Chaos Mesh 2.7 builds with), worded as
the webhook's answer words them: `PATH: Invalid value: VALUE: DETAIL`, several as `[A, B]`."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class GoValue:
    """A value as Go's %#v or String() prints it, where Python's repr would not: a Go struct, a slice, a Duration."""

    text: str


def struct(name: str) -> GoValue:
    """A struct value: printed with its type and `{...}` (Go's %#v spells out every field, nested)."""
    return GoValue(f"v1alpha1.{name}{{...}}")


def strings(items: list[str]) -> GoValue:
    return GoValue("[]string{" + ", ".join(json.dumps(i, ensure_ascii=False) for i in items) + "}")


def show(value: object) -> str:
    """ErrorBody's printing: a nil pointer as the string "null", strings quoted, numbers as they are."""
    if isinstance(value, GoValue):
        return value.text
    if value is None:
        value = "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


class Path:
    """field.Path: `spec.templates[0].name`."""

    def __init__(self, text: str = "") -> None:
        self.text = text

    def child(self, *names: str) -> Path:
        return Path(".".join(n for n in (self.text, *names) if n))

    def index(self, i: int) -> Path:
        return Path(f"{self.text}[{i}]")

    def __str__(self) -> str:
        return self.text


def invalid(path: Path, value: object, detail: str) -> str:
    return f"{path}: Invalid value: {show(value)}: {detail}"


def required(path: Path, detail: str) -> str:
    return f"{path}: Required value: {detail}"


def aggregate(errors: list[str]) -> str:
    """ErrorList.ToAggregate().Error(): each message once, one bare, several bracketed."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
