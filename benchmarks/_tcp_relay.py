"""The floor for any user-space proxy: a bare TCP relay (uvloop protocols, each read written to
the other side in the same callback), for the proxy benchmark to compare against.
Run: python benchmarks/_tcp_relay.py PORT UPSTREAM_PORT
"""

from __future__ import annotations

import asyncio
import sys

import uvloop


class Pipe(asyncio.Protocol):
    def __init__(self, peer: asyncio.Transport | None = None) -> None:
        self.peer, self.early = peer, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self.early += data  # before the upstream connection is up
        else:
            self.peer.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.peer.close()


class Downstream(Pipe):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.get_running_loop().create_task(self.connect())

    async def connect(self) -> None:
        up, _ = await asyncio.get_running_loop().create_connection(lambda: Pipe(self.transport), "127.0.0.1", UPSTREAM)
        self.peer = up
        up.write(self.early)


async def main(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(Downstream, "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    UPSTREAM = int(sys.argv[2])
    uvloop.run(main(int(sys.argv[1])))
