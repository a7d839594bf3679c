"""An SSE source for the proxy benchmark: requests come in groups (`x-pair: K`, `x-leg: NAME`,
`x-legs: N`) and once all N legs of a group are open, each event is written to all of them back to
back (rotating which goes first), the first after `x-offset` seconds, then one every GAP.
Run (repo root): python -m benchmarks._paired_source PORT GAP EVENTS
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import cast

import uvloop

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
PAIRS: dict[str, dict[str, asyncio.Transport]] = {}


class Conn(asyncio.Protocol):
    def __init__(self, gap: float, events: int) -> None:
        self.gap, self.events, self.buf = gap, events, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = cast(asyncio.Transport, transport)  # a stream connection's transport is a Transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, _, self.buf = self.buf.partition(b"\r\n\r\n")
            headers = {
                k.strip().lower(): v.strip().decode()
                for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
            }
            if head.startswith(b"GET /healthz"):
                self.tr.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                continue
            legs = PAIRS.setdefault(headers[b"x-pair"], {})
            legs[headers[b"x-leg"]] = self.tr
            if len(legs) == int(headers[b"x-legs"]):
                asyncio.get_running_loop().create_task(self.stream(legs, float(headers[b"x-offset"])))

    async def stream(self, legs: dict[str, asyncio.Transport], offset: float) -> None:
        order = list(legs.values())
        for tr in order:
            tr.write(HEAD)
        k = next(key for key, v in PAIRS.items() if v is legs)
        deadline = time.monotonic() + offset
        for i in range(self.events):
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            deadline += self.gap
            data = b'data: {"k":%s,"i":%d}\n\n' % (k.encode(), i)
            frame = b"%x\r\n%s\r\n" % (len(data), data)
            for j in range(len(order)):
                order[(i + j) % len(order)].write(frame)
        for tr in order:
            tr.write(b"0\r\n\r\n")
        del PAIRS[k]


async def main(port: int, gap: float, events: int) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Conn(gap, events), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])))
