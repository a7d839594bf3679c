"""The floor for any user-space proxy: a bare TCP relay (uvloop protocols, each read written to
the other side in the same callback), for the proxy benchmark to compare against.
Run (repo root): python -m benchmarks._tcp_relay PORT UPSTREAM_PORT
"""

from __future__ import annotations

import asyncio
import sys
from typing import cast

import uvloop


class Pipe(asyncio.Protocol):
    def __init__(self, peer: asyncio.Transport | None = None) -> None:
        self.peer, self.early = peer, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's transport is a Transport

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self.early += data  # before the upstream connection is up
        else:
            self.peer.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.peer.close()


class Downstream(Pipe):
    def __init__(self, upstream: int) -> None:
        super().__init__()
        self.upstream = upstream

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.get_running_loop().create_task(self.connect())

    async def connect(self) -> None:
        up, _ = await asyncio.get_running_loop().create_connection(
            lambda: Pipe(self.transport), "127.0.0.1", self.upstream
        )
        self.peer = up
        up.write(self.early)


async def main(port: int, upstream: int) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Downstream(upstream), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2])))
