"""A target that streams faster than any client reads: every chat completion gets one-character content
events written as fast as the socket takes them (64 KiB chunks of them), until the client leaves, or,
with `events`, that many and then usage and [DONE]. In threads of the test process:
`with running() as server:`; `server.sent` counts the events written to each connection so far."""

from __future__ import annotations

import contextlib
import socket

from tests.servers import frames, threaded

EVENT = frames.event(frames.content("x"))
BATCH = EVENT * (65536 // len(EVENT))
PER_BATCH = len(BATCH) // len(EVENT)


class Flood(threaded.Threaded):
    def __init__(self, events: int | None) -> None:
        super().__init__()
        self.events = events
        self._sent: list[list[int]] = []  # per connection in the order they came: events written so far

    @property
    def sent(self) -> list[int]:
        return [n for (n,) in self._sent]

    def connection(self, conn: socket.socket) -> None:
        sent = [0]
        self._sent.append(sent)
        buf = b""
        with conn, contextlib.suppress(OSError):
            while frames.request(buf) is None:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            conn.sendall(frames.SSE_HEAD)
            left = self.events
            while left is None or left > 0:
                n = PER_BATCH if left is None else min(PER_BATCH, left)
                conn.sendall(frames.chunk(BATCH[: n * len(EVENT)]))
                sent[0] += n
                if left is not None:
                    left -= n
            tail = frames.event(frames.usage(self.events or 0)) + frames.DONE
            conn.sendall(frames.chunk(tail) + frames.LAST_CHUNK)
            while conn.recv(65536):  # until the client closes (a next request on it is not served)
                pass


def running(events: int | None = None) -> contextlib.AbstractContextManager[Flood]:
    """The server on a free loopback port; closed at exit."""
    return threaded.running(Flood(events))
