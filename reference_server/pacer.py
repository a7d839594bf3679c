"""Output pacer: release tokens at a target rate, and a frame at least every `max_gap_s`.

Yields the request's deltas, or None where a heartbeat frame is due (the API
writes it as an SSE comment, which carries no text, so it never counts as a token).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from reference_server.sequence import Delta, Sequence


async def paced(seq: Sequence, tokens_per_s: float, max_gap_s: float) -> AsyncIterator[Delta | None]:
    loop = asyncio.get_running_loop()
    interval = 1.0 / tokens_per_s
    next_at = last_frame = loop.time()
    while True:
        try:
            items = await asyncio.wait_for(seq.outbox.get(), max(0.0, last_frame + max_gap_s - loop.time()))
        except TimeoutError:
            last_frame = loop.time()
            yield None
            continue
        for d in items:
            while (wait := next_at - loop.time()) > 0:
                await asyncio.sleep(min(wait, max_gap_s))
                if next_at > loop.time():
                    last_frame = loop.time()
                    yield None
            next_at = max(next_at, loop.time()) + d.num_tokens * interval
            last_frame = loop.time()
            yield d
            if d.finish_reason is not None:
                return
