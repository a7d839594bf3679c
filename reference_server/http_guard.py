"""Request heads that come too slowly or grow too large are cut off (slowloris).

uvicorn's httptools protocol has neither a header-read timeout (`timeout_keep_alive` only runs
between requests, and the first byte of a request cancels it) nor a header-size limit (h11's
`h11_max_incomplete_event_size` is h11's alone), so a client that sends one header byte a second
holds its connection for ever. This subclass arms a timer when a connection opens and when a
request begins, and disarms it once the request's headers are complete; past the timeout it
answers 408 (or nothing, to a connection that never sent a byte), past `max_header_bytes` of
head 431, and closes the connection. It also notes when each request's first byte was read
(`request.state.received`), so that the time a request spends queued on a busy event loop before
its handler runs counts in the sim's frontend time instead of adding to it.
"""

from __future__ import annotations

import asyncio
import time
from http import HTTPStatus
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeadGuardProtocol(HttpToolsProtocol):
    header_timeout_s: ClassVar[float] = 10.0
    max_header_bytes: ClassVar[int] = 64 * 1024

    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override] # uvicorn's signature
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_timer is not None:  # still inside a request head after this read
            self._head_bytes += len(data)
            if self._head_bytes > self.max_header_bytes:
                self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["state"]["received"] = time.monotonic()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_bytes = 0
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._refuse, HTTPStatus.REQUEST_TIMEOUT)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _refuse(self, status: HTTPStatus) -> None:
        """Answer `status` and close. A connection that sent nothing is closed silently, like an idle
        keep-alive one (a client may be sending its first request just then), and so is one whose
        previous response is still under way."""
        started = self._head_bytes > 0
        self._disarm()
        if self.transport.is_closing():
            return
        if started and (self.cycle is None or self.cycle.response_complete):
            head = f"HTTP/1.1 {status.value} {status.phrase}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            self.transport.write(head.encode())
        self.transport.close()


def guarded(header_timeout_s: float, max_header_bytes: int) -> type[HeadGuardProtocol]:
    """The protocol class with these limits, for `uvicorn.Config(http=...)`."""
    return type(
        "HeadGuard", (HeadGuardProtocol,), {"header_timeout_s": header_timeout_s, "max_header_bytes": max_header_bytes}
    )
