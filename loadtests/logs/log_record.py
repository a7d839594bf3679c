"""One recorded request, as every log and trace reader produces it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Recorded:
    """The response as the log recorded it, where it did."""

    status: int | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    output_tokens: int | None = None


@dataclass(slots=True)
class LogRecord:
    """A request read from a log: when (`ts` as the file has it, `offset` seconds after the log's first
    record), who (`user`, optional `session` and `turn`), in what language and API, and either the request body
    or the token counts a trace records (`input_tokens`, `hash_ids` of `block_tokens`-token prompt
    blocks shared between requests with equal ids)."""

    line: int  # 1-based line of the file
    ts: float  # seconds (epoch, or from the trace's own origin)
    user: str
    session: str | None = None  # from the log, or a chain of prompts (logs/conversations.py)
    turn: int | None = None  # its place in the session (1: the first), in the log's order
    after: float | None = None  # a later turn: seconds from the turn before's recorded end to its start
    lang: str | None = None  # None: assigned by the language mix
    api: str | None = None  # None: the replay's --api
    model: str | None = None
    body: dict[str, Any] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None  # the recorded output length, to ask for
    hash_ids: tuple[int, ...] = ()
    block_tokens: int = 0
    response: Recorded | None = None
    offset: float = field(default=0.0)

    @property
    def whole(self) -> str:
        """What a replay keeps together, in a sample, on one worker, on one A/B side: the session, else the user."""
        return self.session or self.user
