"""An SSE source for the proxy benchmark: requests come in groups (`x-pair: K`, `x-leg: NAME`,
`x-legs: N`) and once all N legs of a group are open, each event is written to all of them back to
back (rotating which goes first), the first after `x-offset` seconds, then one every GAP.
Run (repo root): python -m tests.servers.paired PORT GAP EVENTS
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import cast

import uvloop

from tests.servers import frames

PAIRS: dict[str, dict[str, asyncio.Transport]] = {}


class Conn(asyncio.Protocol):
    def __init__(self, gap: float, events: int) -> None:
        self.gap, self.events, self.buf = gap, events, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = cast(asyncio.Transport, transport)  # a stream connection's transport is a Transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (got := frames.request(self.buf)) is not None:
            line, headers, _, self.buf = got
            if line.startswith(b"GET /healthz"):
                self.tr.write(frames.answer(b"ok", b"text/plain"))
                continue
            legs = PAIRS.setdefault(headers[b"x-pair"].decode(), {})
            legs[headers[b"x-leg"].decode()] = self.tr
            if len(legs) == int(headers[b"x-legs"]):
                asyncio.get_running_loop().create_task(self.stream(legs, float(headers[b"x-offset"])))

    async def stream(self, legs: dict[str, asyncio.Transport], offset: float) -> None:
        order = list(legs.values())
        for tr in order:
            tr.write(frames.SSE_HEAD)
        k = next(key for key, v in PAIRS.items() if v is legs)
        deadline = time.monotonic() + offset
        for i in range(self.events):
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            deadline += self.gap
            data = b'data: {"k":%s,"i":%d}\n\n' % (k.encode(), i)
            frame = frames.chunk(data)
            for j in range(len(order)):
                order[(i + j) % len(order)].write(frame)
        for tr in order:
            tr.write(frames.LAST_CHUNK)
        del PAIRS[k]


async def main(port: int, gap: float, events: int) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Conn(gap, events), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])))
