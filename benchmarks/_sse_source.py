"""A bare SSE source for the client benchmark: raw asyncio (uvloop), OpenAI chat chunk shape.

Each request gets `--events` content events, the first after `--gap` and then one every `--gap`
seconds, each carrying `x_sent_ns` (unix ns, taken right before the write); the send times are
kept per x-request-id and served at GET /sent. Run (repo root): python -m benchmarks._sse_source PORT EVENTS GAP
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import cast

import uvloop

SENT: dict[str, list[int]] = {}
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Conn(asyncio.Protocol):
    def __init__(self, events: int, gap: float) -> None:
        self.events, self.gap, self.buf = events, gap, b""
        self.t: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = cast(asyncio.Transport, transport)  # a stream connection's transport is a Transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head, sep, rest = self.buf.partition(b"\r\n\r\n")
        if not sep:
            return
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
        }
        n = int(headers.get(b"content-length", b"0"))
        if len(rest) < n:
            return
        self.buf = rest[n:]
        if head.startswith(b"GET /sent"):
            body = json.dumps(SENT).encode()
            self.tr.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        elif head.startswith(b"GET /healthz"):
            self.tr.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        else:
            self.t = asyncio.get_running_loop().create_task(self.stream(headers.get(b"x-request-id", b"").decode()))

    async def stream(self, rid: str) -> None:
        sent = SENT.setdefault(rid, [])
        self.tr.write(HEAD)
        deadline = time.monotonic()
        for _ in range(self.events):
            deadline += self.gap
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            ns = time.time_ns()
            self.tr.write(
                chunk(
                    b'data: {"choices":[{"index":0,"delta":{"content":" w"},"finish_reason":null}],'
                    b'"x_sent_ns":%d}\n\n' % ns
                )
            )
            sent.append(ns)
        self.tr.write(
            chunk(b'data: {"choices":[],"usage":{"completion_tokens":%d}}\n\n' % self.events)
            + chunk(b"data: [DONE]\n\n")
            + b"0\r\n\r\n"
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if self.t:
            self.t.cancel()


async def main(port: int, events: int, gap: float) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Conn(events, gap), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
