"""Raw HTTP/1.1 on a socket for the proxy's tests: requests written by hand, answers read back
with h11 (an HTTP parser independent of the proxy's httptools), pipelined ones in order."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import h11


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


def request(
    method: str,
    target: str,
    body: bytes = b"",
    *,
    chunks: list[bytes] | None = None,
    extra: str = "",
    version: str = "1.1",
) -> bytes:
    """One request's bytes: a content-length body, or `chunks` as a chunked one."""
    head = f"{method} {target} HTTP/{version}\r\nhost: test\r\n{extra}"
    if chunks is not None:
        framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks if c) + b"0\r\n\r\n"
        return (head + "transfer-encoding: chunked\r\n\r\n").encode() + framed
    if body or method in ("POST", "PUT"):
        head += f"content-length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


class Reader:
    """Answers off one connection, in order; `buf` keeps what came after the last one."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, b""

    def answer(self, method: str) -> Answer | None:
        """The next answer (to a request with `method`), or None if the connection closed before one."""
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method=method, target="/", headers=[("host", "test")]))
        conn.send(h11.EndOfMessage())
        if self.buf:  # (empty data would tell h11 the connection closed)
            conn.receive_data(self.buf)
        status, headers, body = 0, {}, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = self.sock.recv(65536)
                if not data and not status:
                    return None
                conn.receive_data(data)
            elif isinstance(event, h11.Response):
                status, headers = event.status_code, {k.decode(): v.decode("latin-1") for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                self.buf = conn.trailing_data[0]
                return Answer(status, headers, body)

    def closed(self) -> bool:
        """Whether the peer closed the connection with nothing more to read."""
        return not self.buf and self.sock.recv(1) == b""
