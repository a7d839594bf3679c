"""Connections to the upstream: one exchange at a time each, kept in a pool between exchanges."""

from __future__ import annotations

import asyncio
import ssl
from typing import TYPE_CHECKING, cast

from faults.proxy.address import Target

if TYPE_CHECKING:
    from faults.proxy.exchange import Exchange

CONNECT_TIMEOUT_S = 10.0
IDLE_MAX = 256  # pooled connections kept; more are closed


class UpstreamError(Exception):
    """The upstream gave no usable answer (before any of it reached the client): a 502 saying why."""


class Stale(UpstreamError):
    """A pooled connection the upstream had closed before answering: send the request again, on a new one."""

    def __init__(self) -> None:
        super().__init__("upstream closed the connection before answering")


class Upstream(asyncio.Protocol):
    transport: asyncio.Transport  # set by connection_made, which create_connection awaits

    def __init__(self) -> None:
        self.exchange: Exchange | None = None
        self.lost = False
        self.holds: set[str] = set()  # why reading is paused (the client's buffer, a fault's queue)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's is a Transport

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:  # bytes nobody asked for: the connection is out of step
            self.abort()
        else:
            self.exchange.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.exchange is not None:
            self.exchange.upstream_lost(exc)

    def hold(self, reason: str, on: bool) -> None:
        """Pause reading while any reason holds it, resume when none does."""
        was = bool(self.holds)
        if on:
            self.holds.add(reason)
        else:
            self.holds.discard(reason)
        if was != bool(self.holds) and not self.lost:
            if self.holds:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    def abort(self) -> None:
        """Drop the connection (the upstream cancels what it was doing for it)."""
        self.transport.abort()


class Pool:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.tls = ssl.create_default_context() if target.tls else None
        self.idle: list[Upstream] = []

    async def get(self, fresh: bool = False) -> tuple[Upstream, bool]:
        """(a connection, whether it was pooled): an idle one unless `fresh`, else a new one."""
        while self.idle and not fresh:
            up = self.idle.pop()
            if not up.lost:
                return up, True
        loop, t = asyncio.get_running_loop(), self.target
        try:
            _, up = await asyncio.wait_for(
                loop.create_connection(
                    Upstream, t.host, t.port, ssl=self.tls, server_hostname=t.host if self.tls else None
                ),
                CONNECT_TIMEOUT_S,
            )
        except (OSError, TimeoutError):
            raise UpstreamError("upstream unreachable") from None
        return up, False

    def put(self, up: Upstream) -> None:
        """Keep a connection whose exchange ended cleanly, reading again, for the next request."""
        up.exchange = None
        for reason in list(up.holds):
            up.hold(reason, False)
        if up.lost:
            return
        if len(self.idle) >= IDLE_MAX:
            up.transport.close()
        else:
            self.idle.append(up)
