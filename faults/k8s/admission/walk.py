"""genericwebhook's walk (api/genericwebhook, Chaos Mesh 2.7): every field of a chaos object,
breadth first in Go's field order, each checked by its type's Validate or its `webhook:` tag's,
after the mutating webhook's defaults. Fields are named by their Go names, as the webhook's paths are."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faults.k8s.admission.fielderrors import Path

Check = Callable[[Any, Path], list[str]]


@dataclass(frozen=True)
class Struct:
    """A Go struct type: its fields that hold a check or lead to one, and its own Validate."""

    fields: tuple[Field, ...] = ()
    check: Check | None = None


@dataclass(frozen=True)
class Field:
    go: str  # the Go field's name: the webhook's path
    json: str | None = None  # its key; None: embedded, its fields inline in the same mapping
    of: Struct | None = None  # a struct to walk into
    check: Check | None = None  # the `webhook:` tag's validator
    pointer: bool = False  # nil (absent or null) is skipped, and so is all under it
    nilable: bool = False  # `webhook:",nilable"`: checked even when nil
    default: str | None = None  # the `default:` tag the mutating webhook fills an empty string with
    many: bool = False  # a slice: each item walked as `of`


def _value(f: Field, mapping: dict) -> object:
    if f.json is None:
        return mapping
    v = mapping.get(f.json)
    if v is None and not f.pointer:
        v = {} if f.of is not None and not f.many else [] if f.many else ""
    if f.default is not None and v == "":
        v = f.default
    return v


def validate(root: Struct, obj: dict) -> list[str]:
    """Every error gw.Validate finds in `obj` (a chaos object, or a root holding an embedded spec)."""
    errors: list[str] = []
    Node = tuple[Struct | None, Check | None, Any, Path, bool, bool]  # type, tag, value, path, nilable, a slice
    queue: deque[Node] = deque()

    def push(s: Struct, mapping: dict, path: Path) -> None:
        for f in s.fields:
            queue.append((f.of, f.check, _value(f, mapping), path.child(f.go), f.nilable, f.many))

    push(root, obj, Path())
    while queue:
        of, tag, v, path, nilable, many = queue.popleft()
        own = of.check if of is not None and not many else None
        check = own or tag
        if check is not None and (v is not None or nilable):
            errors += check(v, path)
        if many and isinstance(v, list):
            queue.extend((of, None, item, path.index(i), False, False) for i, item in enumerate(v))
        elif of is not None and isinstance(v, dict):
            push(of, v, path)
    return errors
