"""The ground-truth SSE server of the generator-capacity benchmark, in Python: `truth.c` is the
same in C, which the benchmark builds and prefers (this one's lateness passes 0.2 ms near 60,000 events/s).

OpenAI chat-completion chunks over HTTP/1.1 (keep-alive, chunked). Each request gets `EVENTS`
content events, the first `TTFT` after the request has arrived and then one every ~`GAP`; each
event is sent at its intended time (CLOCK_MONOTONIC ns) from a timerfd armed at the next due
event (ns resolution; asyncio's timers round to the millisecond; the last 50 µs in a spin), and
stamped right after the send system call returns. GET /truth: per x-request-id the arrival, the
language and each event's actual send time (ns after the arrival), and the server's lateness
(actual - intended, µs) per event.
It asks for SCHED_FIFO and says at GET /truth whether it got it.
Run (repo root): python -m tests.servers.truth PORT
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import json
import os
import random
import select
import socket
import sys
import time
from dataclasses import dataclass, field

from tests.servers import frames

EVENTS = 60
TTFT_NS = (15_000_000, 25_000_000)  # uniform, per request
GAP_NS = (5_000_000, 7_000_000)  # uniform, per event: ~6 ms
SPIN_NS = 50_000  # an event due this soon is waited for in a spin: cheaper than a wakeup, and on time
WORDS = {"de": " Wort", "fr": " mot", "es": " palabra", "it": " parola", "pt": " palavra", "zh": " 词", "ja": " 言葉"}


def between(rng: random.Random, bounds: tuple[int, int]) -> int:
    """Uniform in `bounds` (ns; random.randint costs several times more)."""
    return bounds[0] + int(rng.random() * (bounds[1] - bounds[0]))


def content_event(lang: str) -> bytes:
    return frames.chunk(frames.event(frames.content(WORDS.get(lang, " word"))))


END = frames.chunk(frames.event(frames.usage(EVENTS))) + frames.chunk(frames.DONE) + frames.LAST_CHUNK


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


class TimerFd:
    """A CLOCK_MONOTONIC timerfd armed at absolute ns times (libc through ctypes: Python's
    os.timerfd_* arrive in 3.13)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.timerfd_create(time.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create")
        self._spec = _Itimerspec()

    def arm(self, at_ns: int) -> None:
        self._spec.value.sec, self._spec.value.nsec = divmod(at_ns, 1_000_000_000)
        self._libc.timerfd_settime(self.fd, 1, ctypes.byref(self._spec), None)  # 1: TFD_TIMER_ABSTIME

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 8)


@dataclass
class Stream:
    conn: Conn
    rid: str
    event: bytes
    arrived: int
    rng: random.Random
    actual: list[int] = field(default_factory=list)


@dataclass
class Conn:
    sock: socket.socket
    buf: bytes = b""
    busy: bool = False  # a stream is in flight on it


class TruthServer:
    def __init__(self, port: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", port), backlog=4096)
        self.listener.setblocking(False)
        self.timer = TimerFd()
        self.ep = select.epoll()
        self.ep.register(self.listener.fileno(), select.EPOLLIN)
        self.ep.register(self.timer.fd, select.EPOLLIN)
        self.conns: dict[int, Conn] = {}
        self.due: list[tuple[int, int, Stream]] = []  # (intended ns, seq, stream)
        self.seq = 0
        self.truth: dict[str, dict] = {}
        self.lateness_us: list[int] = []
        self.realtime = self._realtime()

    @staticmethod
    def _realtime() -> str:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
            return "SCHED_FIFO"
        except (OSError, AttributeError) as e:
            return f"normal priority (SCHED_FIFO refused: {e})"

    def serve(self) -> None:
        armed = 0
        while True:
            timeout = -1.0 if not self.due else max(0.0, (self.due[0][0] - time.monotonic_ns()) / 1e9 + 0.01)
            for fd, _ in self.ep.poll(timeout):
                if fd == self.timer.fd:
                    self.timer.clear()
                elif fd == self.listener.fileno():
                    self._accept()
                else:
                    self._read(fd)
            self._send_due()
            if self.due and self.due[0][0] != armed:
                armed = self.due[0][0]
                self.timer.arm(armed)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(True)  # sends are small and the peer reads: a send never waits long
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.conns[sock.fileno()] = Conn(sock)
            self.ep.register(sock.fileno(), select.EPOLLIN)

    def _read(self, fd: int) -> None:
        conn = self.conns[fd]
        try:
            data = conn.sock.recv(65536)
        except OSError:  # reset by the client: as closed
            data = b""
        if not data:
            self.ep.unregister(fd)
            conn.sock.close()
            del self.conns[fd]
            return
        conn.buf += data
        self._handle(conn)

    def _handle(self, conn: Conn) -> None:
        """Start the next complete request on `conn` when none is in flight."""
        got = None if conn.busy else frames.request(conn.buf)
        if got is None:
            return
        line, headers, _, conn.buf = got
        arrived = time.monotonic_ns()
        if line.startswith(b"GET /healthz"):
            conn.sock.sendall(frames.answer(b"ok", b"text/plain"))
        elif line.startswith(b"GET /truth"):
            body = json.dumps({"realtime": self.realtime, "lateness_us": self.lateness_us, "requests": self.truth})
            conn.sock.sendall(frames.answer(body.encode()))
        else:
            rid = headers.get(b"x-request-id", b"").decode()
            lang = headers.get(b"x-llmchaos-lang", b"en").decode()
            conn.sock.sendall(frames.SSE_HEAD)
            conn.busy = True
            stream = Stream(conn, rid, content_event(lang), arrived, random.Random(rid))
            self.truth[rid] = {"lang": lang, "arrived_ns": arrived, "wall_ns": time.time_ns(), "sent_ns": stream.actual}
            self._schedule(stream, arrived + between(stream.rng, TTFT_NS))

    def _schedule(self, stream: Stream, at: int) -> None:
        self.seq += 1
        heapq.heappush(self.due, (at, self.seq, stream))

    def _send_due(self) -> None:
        due = self.due
        while due and due[0][0] <= time.monotonic_ns() + SPIN_NS:
            intended, _, s = heapq.heappop(due)
            while time.monotonic_ns() < intended:
                pass
            if s.conn.sock.fileno() < 0:  # the client went away: the stream ends here
                continue
            try:
                s.conn.sock.sendall(s.event)
            except OSError:
                continue
            t = time.monotonic_ns()
            s.actual.append(t - s.arrived)
            self.lateness_us.append((t - intended) // 1000)
            if len(s.actual) < EVENTS:
                self._schedule(s, intended + between(s.rng, GAP_NS))
                continue
            try:
                s.conn.sock.sendall(END)
            except OSError:
                continue
            s.conn.busy = False
            self._handle(s.conn)  # a request that came in meanwhile


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        TruthServer(int(sys.argv[1])).serve()
