"""The prefill engine's KV server: each prefilled prompt's KV cache, offered under the transfer id
the router gave it, sent once to the decode engine that asks for it (`kv_pull`), paced at the link's
speed scaled as the bytes are (so a transfer takes the time its full size would), through `link`.

The wire, one transfer per connection: decode sends `GET ID\\n`; prefill answers `OK TOKENS BYTES\\n`
and the bytes, or `ERR WHY\\n` and closes. Hand-written: no library speaks a KV connector's wire to
a stand-in, and the bytes have to be real for a kernel's netem/tbf on this port to act on them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from reference_server.disagg.link import Link
from reference_server.disagg.metrics import KVMetrics

CHUNK = 64 * 1024
OFFER_TTL_S = 120.0  # a prefilled KV no decode engine came for is dropped after this
ZEROS = bytes(CHUNK)


@dataclass(frozen=True)
class Wire:
    """What a transfer sends: `scale` of the prompt's full KV bytes, at `scale` of the link's speed."""

    bytes_per_token: int
    link_gbps: float
    scale: float

    def size(self, tokens: int) -> int:
        return max(1, round(tokens * self.bytes_per_token * self.scale))

    def seconds(self, tokens: int) -> float:
        """The full size's time over the link."""
        return tokens * self.bytes_per_token * 8 / (self.link_gbps * 1e9)


class KVServer:
    def __init__(self, wire: Wire, metrics: KVMetrics) -> None:
        self.wire, self.metrics = wire, metrics
        self.link = Link()
        self._offers: dict[str, tuple[int, float]] = {}  # id -> (tokens, offered at)
        self._server: asyncio.Server | None = None

    def offer(self, transfer_id: str, tokens: int) -> None:
        now = time.monotonic()
        for old in [k for k, (_, at) in self._offers.items() if now - at > OFFER_TTL_S]:
            del self._offers[old]
        self._offers[transfer_id] = (tokens, now)

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10.0)
            await self._send(line.decode("ascii", "replace").strip(), writer)
        except (OSError, TimeoutError, ValueError):  # ValueError: a line past the reader's limit, no request
            pass  # decode gave up or went away, or was none: its side says what happened
        finally:
            writer.close()

    async def _send(self, request: str, writer: asyncio.StreamWriter) -> None:
        verb, _, transfer_id = request.partition(" ")
        offer = self._offers.pop(transfer_id, None) if verb == "GET" else None
        if offer is None:
            writer.write(f"ERR no KV for transfer {transfer_id!r}\n".encode())
            await writer.drain()
            return
        start, tokens = time.monotonic(), offer[0]
        size, seconds = self.wire.size(tokens), self.wire.seconds(tokens)
        await self.link.before_first_byte()
        writer.write(f"OK {tokens} {size}\n".encode())
        sent = losses = 0
        while sent < size:
            losses = await self.link.before_chunk(losses)
            n = min(CHUNK, size - sent)
            writer.write(ZEROS[:n])
            await writer.drain()
            sent += n
            self.metrics.sent(n)
            if (ahead := start + seconds * sent / size - time.monotonic()) > 0:
                await asyncio.sleep(ahead)  # paced: the full size's time over the link
        self.metrics.transferred(time.monotonic() - start)
