"""The SSE chaos proxy (`llmchaos proxy`): forwards HTTP/1.1 to an upstream and, while a fault is
active, misbehaves per SSE event the way real gateways and networks do.

A fault is set, read back and cleared over the proxy's own loopback-only control API
(`PUT|GET|DELETE /_llmchaos/fault`), so the schedule runner can apply and revert it like any
other injector. With no fault active, each read from the upstream is written to the client in
the same callback: asyncio protocols and httptools' parser, by hand, because a framework's
per-chunk task hand-offs (aiohttp's cost 1.7 ms at p99 here) are more than the proxy may add.
"""

from __future__ import annotations

import asyncio
import gc
import http
import json
import random
import signal
import ssl
from dataclasses import asdict
from typing import cast
from urllib.parse import urlsplit

import httptools
import uvloop

from faults.proxy.fault import SSEFault
from faults.proxy.misbehave import Misbehave
from llmchaos.net import is_loopback
from llmchaos.wire import LANG_HEADER

CONTROL = "/_llmchaos/fault"
HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"transfer-encoding",
    b"content-length",
    b"host",
    b"te",
    b"trailer",
    b"upgrade",
    b"proxy-authorization",
    b"proxy-authenticate",
    b"accept-encoding",
}
END = b"0\r\n\r\n"
LANG = LANG_HEADER.encode()


def frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def response(status: int, body: dict, headers: dict[str, str] | None = None) -> bytes:
    payload = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n{head}\r\n"
    ).encode() + payload


class ToClient:
    """The client's side of one upstream answer, for Misbehave."""

    def __init__(self, up: Upstream) -> None:
        self.up = up

    def write(self, data: bytes) -> None:
        self.up.client.transport.write(frame(data))

    def end(self) -> None:
        self.up.client.transport.write(END)

    def abort(self) -> None:
        self.up.client.transport.abort()

    def cut_upstream(self) -> None:
        self.up.abort()

    def throttle(self, on: bool) -> None:
        if self.up.transport is not None:
            (self.up.transport.pause_reading if on else self.up.transport.resume_reading)()


class Upstream(asyncio.Protocol):
    """One connection to the upstream; relays one response at a time to the client that asked."""

    client: Client  # set by each `send`; the parser's callbacks only run after one

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.done: asyncio.Future[bool] | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's is a Transport

    def send(self, request: bytes, client: Client, shape: SSEFault | None) -> asyncio.Future[bool]:
        """Write the request; the future says, once the response is relayed, whether to reuse this."""
        assert self.transport is not None, "create_connection returns only after connection_made"
        self.client, self.shape = client, shape
        self.misbehave: Misbehave | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_sent = self.chunked = False
        self.done = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.done

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        names = {k.lower(): v for k, v in self.headers}
        self.chunked = status not in (204, 304) and status >= 200 and b"content-length" not in names
        keep = [(k, v) for k, v in self.headers if k.lower() not in HOP_BY_HOP or k.lower() == b"content-length"]
        if self.chunked:
            keep.append((b"transfer-encoding", b"chunked"))
        phrase = http.HTTPStatus(status).phrase.encode() if status in http.HTTPStatus._value2member_map_ else b""
        head = b"HTTP/1.1 %d %s\r\n%s\r\n" % (status, phrase, b"".join(b"%s: %s\r\n" % kv for kv in keep))
        self.client.transport.write(head)
        self.head_sent = True
        if self.shape and self.chunked and b"text/event-stream" in names.get(b"content-type", b""):
            self.misbehave = Misbehave(self.shape, self.client.proxy.rng, ToClient(self))

    def on_body(self, body: bytes) -> None:
        if self.misbehave is not None:
            self.misbehave.feed(body)
        else:
            self.client.transport.write(frame(body) if self.chunked else body)

    def on_message_complete(self) -> None:
        if self.misbehave is not None:
            self.misbehave.finish(complete=True)
        elif self.chunked:
            self.client.transport.write(END)
        if self.done is not None and not self.done.done():
            self.done.set_result(self.parser.should_keep_alive() and self.misbehave is None)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.abort()

    def abort(self) -> None:
        """Cancel the upstream request (the server frees what it held) and drop this connection."""
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError(f"upstream closed: {exc or 'end of stream'}"))


class Client(asyncio.Protocol):
    """One client connection: parses requests, answers the control API, relays the rest."""

    transport: asyncio.Transport  # set by connection_made, which asyncio calls before anything else

    def __init__(self, proxy: Proxy) -> None:
        self.proxy, self.parser = proxy, httptools.HttpRequestParser(self)
        self.upstream: Upstream | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's is a Transport

    def on_message_begin(self) -> None:
        self.url, self.body = b"", bytearray()
        self.headers: list[tuple[bytes, bytes]] = []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.method = self.parser.get_method()
        self.transport.pause_reading()  # one request at a time
        asyncio.get_running_loop().create_task(self.handle(self.parser.should_keep_alive()))

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self.transport.write(response(400, {"error": f"bad request: {e}"}))
            self.transport.close()

    async def handle(self, keep_alive: bool) -> None:
        path = self.url.split(b"?")[0].decode("latin-1")
        if path == CONTROL:
            self.transport.write(self.proxy.control(self.method, bytes(self.body), self.peer()))
        else:
            keep_alive &= await self.forward()
        if keep_alive and not self.transport.is_closing():
            self.transport.resume_reading()
        else:
            self.transport.close()

    def peer(self) -> str:
        return (self.transport.get_extra_info("peername") or ("",))[0]

    async def forward(self) -> bool:
        """Relay to the upstream; whether the client connection can carry another request."""
        lang = next((v.decode() for k, v in self.headers if k.lower() == LANG), None)
        fault = self.proxy.fault if self.proxy.fault and self.proxy.fault.applies_to(lang) else None
        if fault and fault.error_ratio and self.proxy.rng.random() < fault.error_ratio:
            kind = "rate_limit_error" if fault.error_status == 429 else "server_error"
            self.transport.write(
                response(
                    fault.error_status,
                    {
                        "error": {
                            "message": f"injected by llmchaos fault {fault.name}",
                            "type": kind,
                            "code": fault.error_status,
                        }
                    },
                    {"retry-after": str(fault.retry_after)},
                )
            )
            return True
        request = self.proxy.request_bytes(self.method, self.url, self.headers, bytes(self.body))
        for attempt in (0, 1):  # a pooled connection the upstream closed meanwhile is retried once
            reused, up = await self.proxy.connection()
            if up is None:
                self.transport.write(response(502, {"error": "upstream unreachable"}))
                return True
            self.upstream = up
            try:
                reusable = await up.send(request, self, fault)
            except ConnectionError:
                if up.misbehave is not None and up.misbehave.task.done():  # the fault cut it
                    return not self.transport.is_closing()
                if reused and not up.head_sent and attempt == 0:
                    continue
                if up.misbehave is not None:
                    up.misbehave.task.cancel()
                self.transport.abort()  # a cut upstream is a cut stream
                return False
            finally:
                self.upstream = None
            if up.misbehave is not None:
                await up.misbehave.task
            if reusable:
                self.proxy.idle.append(up)
            else:
                up.abort()
            return not self.transport.is_closing()
        return False

    def pause_writing(self) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.abort()  # the client left: cancel its generation upstream


class Proxy:
    def __init__(self, upstream: str, seed: int = 0) -> None:
        u = urlsplit(upstream)
        self.host, self.tls = u.hostname or "127.0.0.1", u.scheme == "https"
        self.port = u.port or (443 if self.tls else 80)
        self.base = u.path.rstrip("/").encode()
        self.authority = u.netloc.encode()
        self.fault: SSEFault | None = None
        self.rng = random.Random(seed)
        self.idle: list[Upstream] = []

    def request_bytes(self, method: bytes, url: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
        keep = b"".join(b"%s: %s\r\n" % (k, v) for k, v in headers if k.lower() not in HOP_BY_HOP)
        return b"%s %s%s HTTP/1.1\r\nhost: %s\r\ncontent-length: %d\r\n%s\r\n%s" % (
            method,
            self.base,
            url,
            self.authority,
            len(body),
            keep,
            body,
        )

    async def connection(self) -> tuple[bool, Upstream | None]:
        """(reused, a connection): an idle one from the pool, else a new one (None: unreachable)."""
        while self.idle:
            up = self.idle.pop()
            if not up.lost:
                return True, up
        loop = asyncio.get_running_loop()
        try:
            _, up = await asyncio.wait_for(
                loop.create_connection(
                    Upstream, self.host, self.port, ssl=ssl.create_default_context() if self.tls else None
                ),
                10,
            )
        except (OSError, TimeoutError):
            return False, None
        return False, up

    def control(self, method: bytes, body: bytes, peer: str) -> bytes:
        if not is_loopback(peer):
            return response(403, {"error": "control API is loopback-only"})
        if method == b"PUT":
            try:
                fault = SSEFault.from_json(json.loads(body))
            except (ValueError, RecursionError) as e:
                return response(400, {"error": str(e)})
            self.fault, self.rng = fault, random.Random(fault.seed)
        elif method == b"DELETE":
            self.fault = None
        return response(200, {"active": self.fault is not None, "fault": asdict(self.fault) if self.fault else None})


async def main(listen: str, upstream: str, seed: int = 0) -> None:
    host, _, port = listen.rpartition(":")
    proxy, loop, stop = Proxy(upstream, seed), asyncio.get_running_loop(), asyncio.Event()
    server = await loop.create_server(lambda: Client(proxy), host or "127.0.0.1", int(port))
    gc.freeze()  # what startup made is never collected: full collections stay short
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def serve(listen: str, upstream: str, seed: int = 0) -> None:
    uvloop.run(main(listen, upstream, seed))
