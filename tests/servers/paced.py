"""A bare SSE source for the client benchmark: raw asyncio (uvloop), OpenAI chat chunk shape.

Each request gets `--events` content events, the first after `--gap` and then one every `--gap`
seconds, each carrying `x_sent_ns` (unix ns, taken right before the write); the send times are
kept per x-request-id and served at GET /sent. Run (repo root): python -m tests.servers.paced PORT EVENTS GAP
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import cast

import uvloop

from tests.servers import frames

SENT: dict[str, list[int]] = {}


class Conn(asyncio.Protocol):
    def __init__(self, events: int, gap: float) -> None:
        self.events, self.gap, self.buf = events, gap, b""
        self.t: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = cast(asyncio.Transport, transport)  # a stream connection's transport is a Transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        got = frames.request(self.buf)
        if got is None:
            return
        line, headers, _, self.buf = got
        if line.startswith(b"GET /sent"):
            self.tr.write(frames.answer(json.dumps(SENT).encode()))
        elif line.startswith(b"GET /healthz"):
            self.tr.write(frames.answer(b"ok", b"text/plain"))
        else:
            self.t = asyncio.get_running_loop().create_task(self.stream(headers.get(b"x-request-id", b"").decode()))

    async def stream(self, rid: str) -> None:
        sent = SENT.setdefault(rid, [])
        self.tr.write(frames.SSE_HEAD)
        deadline = time.monotonic()
        for _ in range(self.events):
            deadline += self.gap
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            ns = time.time_ns()
            self.tr.write(frames.chunk(frames.event(frames.content(" w", x_sent_ns=ns))))
            sent.append(ns)
        self.tr.write(
            frames.chunk(frames.event(frames.usage(self.events))) + frames.chunk(frames.DONE) + frames.LAST_CHUNK
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if self.t:
            self.t.cancel()


async def main(port: int, events: int, gap: float) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Conn(events, gap), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
