"""A loopback listener in a thread of the test process that answers each connection in turn, for
tests that write a response byte by byte; `close` stops it and joins its thread."""

from __future__ import annotations

import contextlib
import socket
import threading


class Accepting:
    """Subclasses `answer` one connection (TCP_NODELAY: each write its own segment); set what
    `answer` needs before calling this `__init__`, which starts the thread."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def answer(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def _serve(self) -> None:
        with contextlib.suppress(OSError):  # the listener closed: done
            while True:
                conn, _ = self.listener.accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with conn:
                    self.answer(conn)

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (closing alone does not)
        self.listener.close()
        self.thread.join(10)
        assert not self.thread.is_alive()
