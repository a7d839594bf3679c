"""User-facing input errors: one line naming file, line and field; exit status 2."""

from __future__ import annotations


class UsageError(Exception):
    """Bad user input (config, schedule, log, flag). The CLI prints it as one line and exits 2."""

    exit_code = 2

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None, field: str | None = None
    ) -> None:
        self.message, self.file, self.line, self.field = message, file, line, field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"
