"""The prefill -> decode KV link's fault, held in the prefill engine's KV server (`/admin/kv_link`):
each transfer `delay`ed before its first byte, a share of its chunks `loss`t (each waits TCP's
retransmission timeout, doubled for each loss in a row), or `partition`ed (nothing sent until the
partition heals: a link that blackholes, as a cut cable or a dropping firewall does)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

ACTIONS = ("delay", "loss", "partition")
RTO_S = 0.2  # Linux's minimum retransmission timeout (TCP_RTO_MIN)


@dataclass
class Link:
    action: str | None = None
    delay_ms: float = 0.0
    loss_pct: float = 0.0
    _healed: asyncio.Event = field(default_factory=asyncio.Event)
    _rng: random.Random = field(default_factory=lambda: random.Random(0x4B56))

    def __post_init__(self) -> None:
        self._healed.set()

    def set(self, action: str | None, delay_ms: float = 0.0, loss_pct: float = 0.0) -> None:
        """Set the fault (None: clear it). A cleared partition lets held transfers go on."""
        if action is not None and action not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
        self.action = action
        self.delay_ms = delay_ms if action == "delay" else 0.0
        self.loss_pct = loss_pct if action == "loss" else 0.0
        if action == "partition":
            self._healed.clear()
        else:
            self._healed.set()

    def state(self) -> dict:
        return {"action": self.action, "delay_ms": self.delay_ms, "loss_pct": self.loss_pct}

    async def before_first_byte(self) -> None:
        if self.delay_ms:
            await asyncio.sleep(self.delay_ms / 1000)
        await self._healed.wait()

    async def before_chunk(self, losses: int) -> int:
        """Wait what sending one chunk costs on this link; the losses in a row after it."""
        await self._healed.wait()
        if not self.loss_pct or self._rng.random() * 100 >= self.loss_pct:
            return 0
        await asyncio.sleep(RTO_S * 2**losses)
        return losses + 1
