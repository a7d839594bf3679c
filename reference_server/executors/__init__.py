"""Executors run one scheduled batch and return one sampled token per sampling sequence."""

from __future__ import annotations

from typing import Protocol

from reference_server.scheduler import Batch


class Executor(Protocol):
    async def execute(self, batch: Batch) -> list[int]:
        """Compute the batch's tokens; return the next token of each of `batch.sampling`, in order."""
        ...
