"""One client connection: its requests parsed as they come (pipelined ones queued), answered one at a
time in order. It keeps reading meanwhile, so a client that leaves is noticed at once and its
request cancelled upstream, even while the upstream has sent nothing yet."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, cast

import httptools

from faults.proxy.exchange import Exchange, Shape
from faults.proxy.upstream import Stale, UpstreamError
from faults.proxy.wire import CONTROL, MAX_BODY, MAX_HEAD, HeadTooLarge, Request, grown, is_admin, path, response
from llmchaos.headers import LANG_HEADER
from llmchaos.net import is_loopback

if TYPE_CHECKING:
    from faults.proxy.server import Proxy

PIPELINE_MAX = 16  # requests queued before reading pauses
LINGER_S = 2.0  # after the last answer, how long what the client still sends is read and dropped
LANG = LANG_HEADER.encode()


class Refusal(Exception):
    """A request the proxy will not parse further: answered with `status`, then the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Client(asyncio.Protocol):
    transport: asyncio.Transport  # set by connection_made, which asyncio calls before anything else

    def __init__(self, proxy: Proxy, control_only: bool = False) -> None:
        self.proxy, self.control_only = proxy, control_only  # control_only: the control listener, any peer
        self.parser = httptools.HttpRequestParser(self)
        self.queue: deque[Request | Refusal] = deque()
        self.worker: asyncio.Task[None] | None = None
        self.exchange: Exchange | None = None
        self.req = Request()
        self.in_head = self.refused = self.paused = self.writing_paused = False
        self.head_timer: asyncio.TimerHandle | None = None
        self.head = 0  # bytes of the request head: its url and whole headers
        self.fed = 0  # bytes read while its head was unfinished, after the read it began in

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's is a Transport
        self.peer = str((self.transport.get_extra_info("peername") or ("",))[0])

    # Reading requests.

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self.in_head:
            self.fed += len(data)
        try:
            self.parser.feed_data(data)
            if self.in_head and self.fed > MAX_HEAD:
                raise HeadTooLarge
        except httptools.HttpParserUpgrade as e:  # the request is queued; the proxy does not upgrade
            self.parser = httptools.HttpRequestParser(self)
            self.data_received(data[e.args[0] :])
        except httptools.HttpParserCallbackError as e:  # a callback's own exception is its context
            self.refuse(e.__context__ if isinstance(e.__context__, Refusal | HeadTooLarge) else e)
        except (httptools.HttpParserError, HeadTooLarge) as e:
            self.refuse(e)

    def refuse(self, why: Exception) -> None:
        self.refused = True  # nothing more is parsed: what comes is read and dropped
        if isinstance(why, HeadTooLarge):
            why = Refusal(431, f"request {why}")
        elif not isinstance(why, Refusal):
            why = Refusal(400, f"bad request: {why}")
        self.queue.append(why)
        self.kick()

    def eof_received(self) -> bool:
        return False  # the client closed its side: it left (connection_lost follows)

    def on_message_begin(self) -> None:
        self.req, self.in_head, self.head, self.fed = Request(), True, 0, 0
        # Slowloris: a head must be whole within the header timeout of its first byte (an idle
        # keep-alive connection, between requests, is not timed).
        self.head_timer = asyncio.get_running_loop().call_later(
            self.proxy.header_timeout, self.head_too_slow, self.parser
        )

    def head_too_slow(self, parser: httptools.HttpRequestParser) -> None:
        if self.in_head and parser is self.parser and not self.refused:
            self.refuse(Refusal(408, f"request head not complete within {self.proxy.header_timeout:g} s"))

    def on_url(self, url: bytes) -> None:
        self.req.url += url
        self.head = grown(self.head, len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.req.headers.append((name, value))
        self.head = grown(self.head, len(name) + len(value) + 4)

    def on_headers_complete(self) -> None:
        self.in_head = False
        if self.head_timer is not None:
            self.head_timer.cancel()
        if self.parser.get_method() == b"CONNECT":
            raise Refusal(405, "the proxy does not tunnel (CONNECT)")

    def on_body(self, body: bytes) -> None:
        self.req.body += body
        if len(self.req.body) > MAX_BODY:
            raise Refusal(413, f"request body over {MAX_BODY} bytes")

    def on_message_complete(self) -> None:
        req, p = self.req, self.parser
        req.method, req.keep_alive, req.http11 = p.get_method(), p.should_keep_alive(), p.get_http_version() == "1.1"
        self.queue.append(req)
        if len(self.queue) >= PIPELINE_MAX and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        self.kick()

    # Answering them, one at a time.

    def kick(self) -> None:
        if self.worker is None or self.worker.done():
            self.worker = asyncio.get_running_loop().create_task(self.work())

    async def work(self) -> None:
        while self.queue:
            item = self.queue.popleft()
            if self.paused and len(self.queue) < PIPELINE_MAX // 2:
                self.paused = False
                self.transport.resume_reading()
            if isinstance(item, Refusal):
                self.transport.write(response(item.status, {"error": str(item)}, close=True))
                self.linger()
                return
            if not await self.answer(item):
                self.linger()
                return

    def linger(self) -> None:
        """Close once the answers so far are out: the sending side now, then whatever the client still
        sends is read and dropped for up to LINGER_S (closing on unread bytes makes the kernel reset the
        connection, and the client may lose those answers)."""
        self.refused = True
        if self.transport.is_closing():
            return
        self.transport.resume_reading()
        self.transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER_S, self.transport.close)

    async def answer(self, req: Request) -> bool:
        """Answer one request; whether the connection carries on."""
        target = path(req.url)
        close = not req.keep_alive
        if not target.startswith("/"):
            self.reply(req, response(400, {"error": "the request target must be a path"}, close=close))
        elif target == CONTROL:
            self.reply(req, self.proxy.control(req.method, bytes(req.body), self.peer, close, self.control_only))
        elif self.control_only:
            self.reply(req, response(404, {"error": f"this listener answers {CONTROL} alone"}, close=close))
        elif not is_loopback(self.peer) and (
            is_admin(target) or is_admin(self.proxy.target.base.decode("latin-1") + target)
        ):
            self.reply(req, response(403, {"error": "the upstream's admin API is loopback-only"}, close=close))
        else:
            return await self.forward(req)
        return req.keep_alive

    def reply(self, req: Request, answer: bytes) -> None:
        """One of the proxy's own answers; to a HEAD, its head alone."""
        self.transport.write(answer[: answer.index(b"\r\n\r\n") + 4] if req.method == b"HEAD" else answer)

    async def forward(self, req: Request) -> bool:
        shape = self.proxy.shape(req.header(LANG))
        if shape is not None and shape[0].error_ratio and shape[1].random() < shape[0].error_ratio:
            self.reply(req, self.proxy.injected_error(shape[0], close=not req.keep_alive))
            return req.keep_alive
        request = req.upstream_bytes(self.proxy.target.base, self.proxy.target.authority, self.peer)
        req.body.clear()  # it lives on in `request` alone: one copy, gone when this request is answered
        try:
            try:
                return await self.relay(req, shape, request, fresh=False)
            except Stale:  # a pooled connection the upstream had closed: once more, on a new one
                return await self.relay(req, shape, request, fresh=True)
        except UpstreamError as e:
            self.reply(req, response(502, {"error": str(e)}, close=not req.keep_alive))
            return req.keep_alive

    async def relay(self, req: Request, shape: Shape | None, request: bytes, fresh: bool) -> bool:
        up, reused = await self.proxy.pool.get(fresh)
        exchange = self.exchange = Exchange(self.transport, req, shape, up, reused)
        if self.writing_paused:
            up.hold("client", True)
        try:
            reusable = await exchange.run(request)
        finally:
            self.exchange = None
        if reusable:
            self.proxy.pool.put(up)
        else:
            up.transport.close()
        return exchange.keep and not self.transport.is_closing()

    # Back-pressure and leaving.

    def pause_writing(self) -> None:
        self.writing_paused = True
        if self.exchange is not None:
            self.exchange.upstream.hold("client", True)

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.exchange is not None:
            self.exchange.upstream.hold("client", False)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
        if self.exchange is not None:
            self.exchange.close()  # cancel the request upstream now
        if self.worker is not None:
            self.worker.cancel()
        # The parser and this protocol refer to each other, so only a full collection (rare: see
        # gc.freeze in server.py) would free them; let go of the requests' bodies now.
        self.req = Request()
        self.queue.clear()
