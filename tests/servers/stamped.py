"""A minimal OpenAI-style streaming server that stamps each request by the kernel's receive time of
its first bytes (SO_TIMESTAMPNS), for measuring when requests reach a server whatever its own
scheduling: `with running() as server:` ... `server.stamps` (also at `GET /truth`) is {request_id:
unix seconds}; with `running(hold=S)` each answer waits S seconds and `server.answered` says when each
was sent (unix seconds, just before its first byte).

Each connection has its own thread (blocking sockets, keep-alive); every chat completion is answered
with the same short stream ("Hello, world." and usage) whatever it asks."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time

from llmchaos.net import SO_TIMESTAMPNS
from tests.servers import frames, threaded

EVENTS = (
    b'data: {"choices":[{"index":0,"delta":{"content":"Hello,"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":" world."},"finish_reason":"stop"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}}\n\n'
    b"data: [DONE]\n\n"
)


class Stamped(threaded.Threaded):
    def __init__(self, hold: float = 0.0) -> None:
        super().__init__()
        self.hold = hold
        self.stamps: dict[str, float] = {}
        self.answered: dict[str, float] = {}
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # inherited: stamped from a connection's first byte

    def connection(self, conn: socket.socket) -> None:
        buf, stamp = b"", 0.0
        with conn:
            while True:
                try:
                    data, anc, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(16))
                except OSError:
                    return
                if not data:
                    return
                if not buf:
                    for level, kind, payload in anc:
                        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                            sec, nsec = struct.unpack("qq", payload[:16])
                            stamp = sec + nsec * 1e-9
                buf += data
                while (got := frames.request(buf)) is not None:
                    line, headers, _, buf = got
                    conn.sendall(self._answer(line, headers, stamp))

    def _answer(self, line: bytes, headers: dict[bytes, bytes], stamp: float) -> bytes:
        if line.startswith(b"GET /truth"):
            return frames.answer(json.dumps(self.stamps).encode())
        rid = headers.get(b"x-request-id", b"").decode()
        self.stamps[rid] = stamp
        time.sleep(self.hold)
        self.answered[rid] = time.time()
        return frames.answer(EVENTS, b"text/event-stream")


def running(hold: float = 0.0) -> contextlib.AbstractContextManager[Stamped]:
    """The server on a free loopback port, in threads of this process; closed at exit."""
    return threaded.running(Stamped(hold))
