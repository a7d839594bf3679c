"""A target that streams faster than any client reads: every chat completion gets one-character content
events written as fast as the socket takes them (64 KiB chunks of them), until the client leaves, or,
with `events`, that many and then usage and [DONE]. A request that asks for no stream gets a JSON
answer whose content never ends (chunked, as fast as the socket takes it). In threads of the test
process: `with running() as server:`; `server.sent` counts the events (or, for a whole answer, the
64 KiB chunks) written to each connection so far."""

from __future__ import annotations

import contextlib
import json
import socket

from tests.servers import frames, threaded

EVENT = frames.event(frames.content("x"))
BATCH = EVENT * (65536 // len(EVENT))
PER_BATCH = len(BATCH) // len(EVENT)
JSON_HEAD = frames.SSE_HEAD.replace(b"text/event-stream", b"application/json")
TEXT_CHUNK = frames.chunk(b"x" * 65536)


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
            while (req := frames.request(buf)) is None:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            if not json.loads(req[2]).get("stream"):
                self.endless_answer(conn, sent)
                return
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

    @staticmethod
    def endless_answer(conn: socket.socket, sent: list[int]) -> None:
        """A 200 JSON chat completion whose content runs on until the client leaves."""
        conn.sendall(JSON_HEAD + frames.chunk(b'{"choices": [{"index": 0, "message": {"content": "'))
        while True:
            conn.sendall(TEXT_CHUNK)
            sent[0] += 1


def running(events: int | None = None) -> contextlib.AbstractContextManager[Flood]:
    """The server on a free loopback port; closed at exit."""
    return threaded.running(Flood(events))
