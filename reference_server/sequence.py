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


@dataclass(slots=True)
class Delta:
    """What one engine step produced for one sequence."""

    text: str
    num_tokens: int
    finish_reason: str | None = None  # "stop" | "length" | "abort"


_ids = itertools.count()


@dataclass(eq=False)
class Sequence:
    prompt_token_ids: list[int]
    params: SamplingParams
    lang: str = "en"
    arrival: float = field(default_factory=time.monotonic)
    seq_id: int = field(default_factory=lambda: next(_ids))
    status: Status = Status.WAITING
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0  # prefix-cache hit at the last admission
    block_table: list[int] = field(default_factory=list)
    num_preemptions: int = 0
    first_scheduled: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finish_reason: str | None = None
    rng: random.Random | None = None
    internal: bool = False  # a health probe: kept out of the metrics
    block_hashes: list[int] = field(default_factory=list)  # chained hashes of full computed blocks
    text: str = ""  # detokenized output, stop strings applied
    num_sent_chars: int = 0
    outbox: asyncio.Queue[Delta] = field(default_factory=asyncio.Queue)

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

    def token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids
