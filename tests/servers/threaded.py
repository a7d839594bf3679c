"""What the blocking ground-truth servers share: a listener on a free loopback port in a thread of the
test process, a thread for each connection it accepts, and `running` to have one for a `with`."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import TypeVar


class Threaded:
    """A listener whose `connection` runs in a thread of its own for each connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self.connection, args=(conn,), daemon=True).start()

    def connection(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way (close alone does not)
        self.sock.close()


Server = TypeVar("Server", bound=Threaded)


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    """`server` serving until the end of the `with`, then closed (its connections end with their clients)."""
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.close()
        thread.join(5)
