"""A request inside the engine: its tokens, KV blocks, timings and output queue."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field
from enum import Enum, auto


class Status(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 1.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    reasoning_tokens: int = 0  # the first this many output tokens are thinking, not the answer


@dataclass(slots=True)
class Delta:
    """What one engine step produced for one sequence (merged: what several did)."""

    text: str  # of the answer
    num_tokens: int  # thinking and answer
    finish_reason: str | None = None  # "stop" | "length" | "abort"
    reasoning: str = ""  # of the thinking, which comes before any answer


class Outbox:
    """Single-consumer delta queue; `get` returns everything pending at once.

    Hand-written: it is on the per-token path, and asyncio.Queue costs more per item.
    """

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: list[Delta] = []
        self._waiter: asyncio.Future[None] | None = None

    def put(self, delta: Delta) -> None:
        self._items.append(delta)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def get(self) -> list[Delta]:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        items, self._items = self._items, []
        return items


_ids = itertools.count()


@dataclass(eq=False)
class Sequence:
    prompt_token_ids: list[int]
    params: SamplingParams
    lang: str = "en"
    arrival: float = field(default_factory=time.monotonic)
    ready: float = field(default_factory=time.monotonic)  # when the scheduler may see it (sim: after its frontend)
    seq_id: int = field(default_factory=lambda: next(_ids))
    status: Status = Status.WAITING
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0  # prefix-cache hit at the last admission
    num_external_tokens: int = 0  # prompt tokens whose KV a prefill engine sent (disaggregated decode)
    block_table: list[int] = field(default_factory=list)
    num_preemptions: int = 0
    first_scheduled: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finish_reason: str | None = None
    rng: random.Random | None = None
    internal: bool = False  # a health probe: kept out of the metrics
    corrupt: bool = False  # arrived while the admin fault `corrupt` was set: every token shown as garbage
    block_hashes: list[int] = field(default_factory=list)  # chained hashes of full computed blocks
    text: str = ""  # detokenized output, stop strings applied
    stop_reason: str | None = None  # the stop string that ended it (vLLM's stop_reason)
    num_sent_chars: int = 0
    outbox: Outbox = field(default_factory=Outbox)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_uncomputed_tokens(self) -> int:
        """Tokens whose KV is still to compute: the prompt (chunked), or the last sampled token."""
        return self.num_tokens - self.num_computed_tokens

    def token_ids(self, start: int = 0, end: int | None = None) -> list[int]:
        """Tokens [start, end) of prompt + output, without copying the rest."""
        p, end = len(self.prompt_token_ids), self.num_tokens if end is None else end
        if end <= p:
            return self.prompt_token_ids[start:end]
        if start >= p:
            return self.output_token_ids[start - p : end - p]
        return self.prompt_token_ids[start:] + self.output_token_ids[: end - p]
