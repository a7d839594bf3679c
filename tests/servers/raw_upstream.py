"""A raw HTTP/1.1 upstream for the SSE proxy's tests, in threads of the test process: each answer is
written byte for byte as the request's path says, so a test controls framing, timing and misbehaviour.

- `/echo/FRAME[/SIZE][?ANYTHING]` (any method): 200 with header `x-echo: METHOD TARGET SHA` (SHA: the first 16
  hex digits of the request body's SHA-256) and a body of SIZE bytes (default 64) of that line
  repeated; FRAME is `length` (content-length), `chunked` (8 KiB chunks), `close` (HTTP/1.1,
  `connection: close`, no length, then close) or `http10` (an HTTP/1.0 answer, no length, then
  close). A HEAD gets the head alone, with the length a GET would have had.
- `/script` (POST, body JSON): `pieces` (latin-1 strings) written as they are, `gap_s` apart
  (default 5 ms, with TCP_NODELAY, so each is its own read at the proxy); then `repeat` (a
  string) written again and again until the peer leaves, if given; then the connection is
  closed if `close` (default true), else kept for the next request.
- `/slow/SECONDS`: nothing for SECONDS, then `/echo/length`'s answer.

Every request is kept in `seen` (method, target, headers with lower-case names, body).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


def echo_line(method: str, target: str, body: bytes) -> str:
    return f"{method} {target} {hashlib.sha256(body).hexdigest()[:16]}"


def _echo(sock: socket.socket, method: str, target: str, body: bytes) -> bool:
    """Write /echo's answer; whether the connection carries on."""
    parts = target.split("?")[0].split("/")  # '', 'echo', FRAME[, SIZE]
    frame, size = parts[2], int(parts[3]) if len(parts) > 3 else 64
    line = echo_line(method, target, body)
    payload = (line.encode() * (size // len(line) + 1))[:size]
    version = "HTTP/1.0" if frame == "http10" else "HTTP/1.1"
    head = f"{version} 200 OK\r\ncontent-type: text/plain\r\nx-echo: {line}\r\n"
    if frame == "length":
        head += f"content-length: {size}\r\n"
    elif frame == "chunked":
        head += "transfer-encoding: chunked\r\n"
    elif frame == "close":
        head += "connection: close\r\n"
    sock.sendall(head.encode() + b"\r\n")
    if method != "HEAD":
        if frame == "chunked":
            for i in range(0, size, 8192):
                piece = payload[i : i + 8192]
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sock.sendall(b"0\r\n\r\n")
        else:
            sock.sendall(payload)
    return frame in ("length", "chunked")


def _script(sock: socket.socket, body: bytes) -> bool:
    script = json.loads(body)
    for i, piece in enumerate(script["pieces"]):
        if i:
            time.sleep(script.get("gap_s", 0.005))
        sock.sendall(piece.encode("latin-1"))
    if "repeat" in script:
        chunk = script["repeat"].encode("latin-1")
        with contextlib.suppress(OSError):
            while True:
                sock.sendall(chunk)
    return not script.get("close", True)


class _Handler(socketserver.BaseRequestHandler):
    server: RawUpstream

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.open.add(sock)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
                n = int(headers.get("content-length", "0"))  # the proxy always sends a length
                while len(buf) < n:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:n], buf[n:]
                self.server.seen.append(Seen(method, target, headers, body))
                if not self.answer(sock, method, target, body):
                    return
        except OSError:
            return
        finally:
            self.server.open.discard(sock)

    def answer(self, sock: socket.socket, method: str, target: str, body: bytes) -> bool:
        if target.startswith("/echo/"):
            return _echo(sock, method, target, body)
        if target == "/script":
            return _script(sock, body)
        if target.startswith("/slow/"):
            time.sleep(float(target.split("/")[2]))
            return _echo(sock, method, "/echo/length", body)
        sock.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        return True


class RawUpstream(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[Seen] = []
        self.open: set[socket.socket] = set()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def running() -> Iterator[RawUpstream]:
    """The upstream on a free loopback port; stopped, with every connection it holds closed, at exit."""
    server = RawUpstream()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        for sock in list(server.open):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        thread.join(5)
