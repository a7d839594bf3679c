"""What a reader had to skip: counted per kind with the first line numbers, or (strict) the first one
as a UsageError naming the file, the line and the field."""

from __future__ import annotations

from collections import Counter
from typing import Any

from llmchaos.errors import UsageError

EXAMPLES = 5  # line numbers kept per kind


class LogProblem(Exception):
    """One line a reader cannot use. `kind` is one of: not_json, missing_field, bad_value,
    unknown_lang, unknown_api, backwards, bad_row, too_long."""

    def __init__(self, kind: str, field: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.field, self.message = kind, field, message


class Problems:
    """The lines of one log that were skipped, by kind; with `strict`, the first is a UsageError."""

    def __init__(self, path: str, strict: bool = False) -> None:
        self.path, self.strict = path, strict
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[dict[str, Any]]] = {}

    def add(self, line: int, p: LogProblem) -> None:
        if self.strict:
            raise UsageError(p.message, file=self.path, line=line, field=p.field)
        self.counts[p.kind] += 1
        kept = self.examples.setdefault(p.kind, [])
        if len(kept) < EXAMPLES:
            kept.append({"line": line, "field": p.field, "error": p.message})

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path, "counts": dict(self.counts), "examples": self.examples}

    def merge(self, data: dict[str, Any]) -> None:
        """Add another count of the same log (`to_json`'s shape)."""
        self.counts.update(data["counts"])
        for kind, lines in data["examples"].items():
            kept = self.examples.setdefault(kind, [])
            kept.extend(lines[: EXAMPLES - len(kept)])

    def lines(self) -> list[str]:
        """One line per kind for a summary: 'kind: N (lines 3, 9, ...)'."""
        return [
            f"{kind}: {n} (lines {', '.join(str(e['line']) for e in self.examples.get(kind, []))}"
            + (", ..." if n > EXAMPLES else "")
            + ")"
            for kind, n in sorted(self.counts.items())
        ]
