"""One keep-alive HTTP/1.1 connection on the data plane: a non-blocking socket, TLS in memory for
https, and each read stamped with the kernel's receive time (SO_TIMESTAMPNS) on the perf_counter
clock, so an event is timed when it reached the host, not when the generator got to it. TLS goes
through memory BIOs so that even an https stream keeps the kernel's stamp of its bytes.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import struct
import sys
import time
from collections.abc import Callable
from time import perf_counter

from gevent import monkey

from llmchaos.net import SO_TIMESTAMPNS
from loadtests.dataplane.loop import EPOLLIN, EPOLLOUT, EPOLLRDHUP, Plane
from loadtests.dataplane.request import Exchange

_socket = monkey.get_original("socket", "socket")
RX_CMSG = socket.CMSG_SPACE(16)
STAMP = struct.Struct("qq")
BLOCK = 65536
_view = memoryview(bytearray(BLOCK))  # every read lands here first (the plane's thread only): no 64 KiB allocation each


def stamp(ancillary: list[tuple[int, int, bytes]]) -> float:
    """A read's receive time on the perf_counter clock: the kernel's stamp of its last bytes when it
    gave one, never later than now; else now."""
    now = perf_counter()
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = STAMP.unpack_from(payload)
            return now - max(0.0, time.time() - sec - nsec * 1e-9)
    return now


class Connection:
    """To `host` at `address` (family, sockaddr), over TLS when `tls` is given; one exchange at a
    time. Lives on the plane's thread."""

    def __init__(self, plane: Plane, host: str, address: tuple[int, tuple], tls: ssl.SSLContext | None) -> None:
        self.plane, self.host, self.address, self.tls_context = plane, host, address, tls
        self.sock: socket.socket | None = None
        self.fd = -1
        self.tls: ssl.SSLObject | None = None
        self._tls_in: ssl.MemoryBIO  # with `tls`: new for each connection
        self._tls_out: ssl.MemoryBIO
        self._handshaking = False
        self._pending = b""  # bytes still to send
        self.exchange: Exchange | None = None
        self._carrying: Exchange | None = None  # the exchange whose request is being written
        self.opened = 0  # connections opened so far
        self._step: Callable[[], object] = self._on_readable  # what the socket being ready means now
        self._clear_at = 0.0  # the last read that left the socket empty began then (perf_counter)
        self._backlog = False  # the socket may have held bytes since then (a full read)

    def ready(self, events: int) -> None:
        self._step()

    def crashed(self, error: Exception) -> None:
        ex = self.exchange
        self.close()
        if ex is not None and not ex.done:
            ex.end("malformed", f"unreadable by the client: {type(error).__name__}: {error}")

    def start(self, ex: Exchange) -> None:
        """Send `ex` on this connection, opened now unless it is open and idle."""
        if self.exchange is not None:  # the last response is still draining: not worth the wait
            self.close()
        self.exchange, ex.conn = ex, self
        if self.sock is None:
            self._connect(ex)
        else:
            ex.reused = True
            self._write_request(ex)
        self.plane.due(ex)

    def release(self) -> None:
        """The exchange is over and the connection clean: keep it, watching for the peer closing it."""
        self.exchange = None
        if self.sock is not None:
            self._wait(EPOLLIN | EPOLLRDHUP, self._on_readable)

    def close(self) -> None:
        if self.sock is not None:
            self.plane.unwatch(self.fd)
            self.sock.close()
            self.sock, self.tls, self._pending = None, None, b""
        self.exchange = self._carrying = None

    def _wait(self, mask: int, step: Callable[[], object]) -> None:
        self._step = step
        self.plane.watch(self.fd, mask, self)

    # -- opening -------------------------------------------------------------------------------
    def _connect(self, ex: Exchange) -> None:
        family, sockaddr = self.address
        try:  # out of file descriptors, say: this request's connect error, not the plane's end
            sock = _socket(family, socket.SOCK_STREAM)
        except OSError as e:
            ex.ended(e, perf_counter())
            return
        sock.setblocking(False)
        if family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sys.platform == "linux":
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock, self.fd = sock, sock.fileno()
        self.opened += 1
        ex.connecting(perf_counter())
        err = sock.connect_ex(sockaddr)
        if err not in (0, errno.EINPROGRESS):
            self._lost(OSError(err, os.strerror(err)))
            return
        self._wait(EPOLLOUT, self._on_connected)

    def _on_connected(self) -> None:
        assert self.sock is not None
        assert self.exchange is not None
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._lost(OSError(err, os.strerror(err)))
            return
        if self.tls_context is None:
            self.exchange.connected()
            self._write_request(self.exchange)
            return
        self._tls_in, self._tls_out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = self.tls_context.wrap_bio(self._tls_in, self._tls_out, server_hostname=self.host)
        self._handshaking = True
        self._handshake()

    def _handshake(self) -> None:
        assert self.tls is not None
        assert self.exchange is not None
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            self._write(b"")
            return
        except ssl.SSLError as e:
            self._lost(e)
            return
        self._handshaking = False
        self.exchange.connected()
        self._write_request(self.exchange)

    # -- bytes out -----------------------------------------------------------------------------
    def _write_request(self, ex: Exchange) -> None:
        self._carrying = ex  # its last byte written: how long its send took
        self._write(ex.request)

    def _write(self, data: bytes) -> None:
        if self.tls is not None:
            if data:
                self.tls.write(data)
            data = self._tls_out.read()
        self._pending += data
        self._send()

    def _send(self) -> None:
        assert self.sock is not None
        began = perf_counter()
        try:
            sent = self.sock.send(self._pending) if self._pending else 0
        except BlockingIOError:
            sent = 0
        except OSError as e:
            self._lost(e)
            return
        self._pending = self._pending[sent:]
        if self._pending:
            self._wait(EPOLLOUT, self._send)
            return
        if self._carrying is not None:
            self._carrying.written(perf_counter(), began)
            self._carrying = None
        self._wait(EPOLLIN, self._on_readable)

    # -- bytes in ------------------------------------------------------------------------------
    def read_pending(self) -> None:
        """Read what the kernel already holds for the exchange, before one of its limits is judged:
        a plane woken late (a busy machine) must not call silent a stream whose bytes reached the
        host in time (each read keeps its kernel stamp)."""
        ex = self.exchange
        while ex is not None and self.exchange is ex and not ex.done and self._step == self._on_readable:
            if not self._on_readable():
                return

    def _on_readable(self) -> bool:
        """One read, handed on; False when there was nothing to read."""
        sock = self.sock
        if sock is None:
            return False
        began = perf_counter()
        try:
            n, ancillary, _, _ = sock.recvmsg_into((_view,), RX_CMSG)
        except BlockingIOError:
            self._clear_at, self._backlog = began, False
            return False
        except OSError as e:
            self._lost(e)
            return True
        now = stamp(ancillary)
        late = max(0.0, now - (self._clear_at if self._backlog else max(self._clear_at, self.plane.ready_after)))
        if n < BLOCK:
            self._clear_at, self._backlog = began, False
        else:
            self._backlog = True
        data = bytes(_view[:n])
        ex = self.exchange
        if ex is None:  # idle: the peer closed it (or sent what nobody asked for)
            self.close()
            return True
        if self.tls is not None:
            try:
                data, eof = self._decrypt(data)
            except ssl.SSLError as e:
                self._lost(e)
                return True
            if self._handshaking:
                self._handshake()
                return True
            if data:
                ex.received(data, now, late)
            if eof and self.exchange is ex:
                self._lost(None)
            return True
        if data:
            ex.received(data, now, late)
        else:
            self._lost(None)
        return True

    def _decrypt(self, raw: bytes) -> tuple[bytes, bool]:
        """The plaintext `raw` completes, and whether the TLS stream has ended."""
        assert self.tls is not None
        if raw:
            self._tls_in.write(raw)
        else:
            self._tls_in.write_eof()
        if self._handshaking:
            return b"", False
        out: list[bytes] = []
        while True:
            try:
                piece = self.tls.read(BLOCK)
            except ssl.SSLWantReadError:
                return b"".join(out), not raw
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b"".join(out), True
            if not piece:
                return b"".join(out), True
            out.append(piece)

    def _lost(self, error: OSError | None) -> None:
        """The connection closed (`error` None: by the peer) or failed. A request sent on a kept
        connection that brought no byte back goes once more on a new one (the server had closed
        it meanwhile), as HTTP clients do; otherwise the exchange ends with it."""
        ex = self.exchange
        self.close()
        if ex is None or ex.done:
            return
        if ex.reused and not ex.began:
            ex.reused = False
            self.start(ex)
            return
        ex.ended(error, perf_counter())
