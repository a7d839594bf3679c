"""One request sent upstream and its answer relayed to the client, as httptools parses it.

With no fault on the stream, each read is written to the client in the same callback (re-chunked
when the answer has no length and the client speaks HTTP/1.1). An answer whose headers do not end
within MAX_HEAD bytes or HEAD_TIMEOUT_S, or that does not parse, is a 502 if the client has seen
none of it, else a cut connection; an answer delimited by the upstream closing ends cleanly there.
"""

from __future__ import annotations

import asyncio
import http
import random

import httptools

from faults.proxy.fault import SSEFault
from faults.proxy.misbehave import Misbehave
from faults.proxy.upstream import Stale, Upstream, UpstreamError
from faults.proxy.wire import END, HEAD_TIMEOUT_S, HOP_BY_HOP, MAX_HEAD, HeadTooLarge, Request, chunk, grown

Shape = tuple[SSEFault, random.Random]  # the fault on a request, and the random numbers it draws
PHRASES = {s.value: s.phrase.encode() for s in http.HTTPStatus}


class Exchange:
    def __init__(
        self,
        client: asyncio.Transport,
        req: Request,
        shape: Shape | None,
        upstream: Upstream,
        reused: bool,
    ) -> None:
        self.client, self.req, self.shape, self.upstream, self.reused = client, req, shape, upstream, reused
        self.send = client.write
        self.parser = httptools.HttpResponseParser(self)
        self.done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()  # the upstream is reusable
        self.headers: list[tuple[bytes, bytes]] = []
        self.phrase = b""
        self.fed = self.head = 0  # bytes read before the head ended; bytes of its whole headers
        self.timer: asyncio.TimerHandle | None = None
        self.interim = self.head_sent = self.chunked = self.by_close = self.cut = False
        self.keep = req.keep_alive  # whether the client connection carries on afterwards
        self.misbehave: Misbehave | None = None

    async def run(self, request: bytes) -> bool:
        """Relay; whether the upstream connection may serve another request. Raises Stale (send it
        again on a new connection) or UpstreamError (nothing reached the client: answer 502)."""
        self.upstream.exchange = self
        self.upstream.transport.write(request)
        try:
            reusable = await self.done
            if self.misbehave is not None:
                self.keep = await self.misbehave.task and self.keep
        except BaseException:
            self.close()
            raise
        finally:
            # The upstream connection and this exchange refer to each other: detach, so the request
            # (its body may be megabytes) goes now, not at the next full collection.
            self.upstream.exchange = None
        return reusable and not self.cut and not self.upstream.lost

    def close(self) -> None:
        """The client left or the relay failed: stop the stream and cancel the request upstream."""
        if self.misbehave is not None:
            self.misbehave.task.cancel()
        self.upstream.abort()

    # The upstream's side.

    def data_received(self, data: bytes) -> None:
        if self.fed == 0 and not self.head_sent:
            self.timer = asyncio.get_running_loop().call_later(HEAD_TIMEOUT_S, self.fail, "headers took too long")
        if not self.head_sent:
            self.fed += len(data)
        try:
            self.parser.feed_data(data)
            if not self.head_sent and self.fed > MAX_HEAD:
                raise HeadTooLarge
        except httptools.HttpParserCallbackError as e:  # a callback's own exception is its context
            self.fail(str(e.__context__ or e))
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as e:
            self.fail(f"invalid answer ({e})")
        except HeadTooLarge as e:
            self.fail(str(e))

    def fail(self, why: str) -> None:
        if self.done.done():
            return
        self.upstream.abort()
        if self.head_sent:
            self.truncated()
        else:
            self.done.set_exception(UpstreamError(f"upstream sent no usable answer: {why}"))

    def upstream_lost(self, exc: Exception | None) -> None:
        if self.done.done():
            return
        if self.cut:
            self.done.set_result(False)
        elif self.reused and self.fed == 0 and not self.head_sent:
            self.done.set_exception(Stale())
        elif not self.head_sent:
            why = "upstream closed the connection before answering" if self.fed == 0 else "upstream sent half a head"
            self.done.set_exception(UpstreamError(why))
        elif self.by_close and exc is None:
            self.on_message_complete()  # the answer was delimited by the close
        else:
            self.truncated()

    def truncated(self) -> None:
        """The answer broke off after the client had its head: so does the client's."""
        if self.misbehave is not None:
            self.misbehave.finish(complete=False)
        else:
            self.client.abort()
            self.keep = False
        self.done.set_result(False)

    # httptools' callbacks.

    def on_status(self, phrase: bytes) -> None:
        self.phrase += phrase

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        self.head = grown(self.head, len(name) + len(value) + 4)

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            self.interim, self.headers, self.phrase = True, [], b""
            return
        if self.timer is not None:
            self.timer.cancel()
        names = {k.lower(): v for k, v in self.headers}
        has_body = self.req.method != b"HEAD" and status not in (204, 304)
        length = b"content-length" in names and b"transfer-encoding" not in names
        self.by_close = (
            has_body and not length and not names.get(b"transfer-encoding", b"").lower().endswith(b"chunked")
        )
        self.chunked = has_body and not length and self.req.http11
        self.keep &= not has_body or length or self.chunked
        keep = [
            (k, v) for k, v in self.headers if (n := k.lower()) not in HOP_BY_HOP or (n == b"content-length" and length)
        ]
        if self.chunked:
            keep.append((b"transfer-encoding", b"chunked"))
        if not self.keep:
            keep.append((b"connection", b"close"))
        elif not self.req.http11:
            keep.append((b"connection", b"keep-alive"))
        phrase = self.phrase or PHRASES.get(status, b"")
        self.send(b"HTTP/1.1 %d %s\r\n%s\r\n" % (status, phrase, b"".join(b"%s: %s\r\n" % kv for kv in keep)))
        self.head_sent = True
        if self.shape and not length and b"text/event-stream" in names.get(b"content-type", b""):
            self.misbehave = Misbehave(*self.shape, self)
        if not has_body:  # a HEAD's answer has no body whatever its length says: done with this parser
            self.on_message_complete()

    def on_body(self, body: bytes) -> None:
        if self.misbehave is not None:
            self.misbehave.feed(body)
        elif self.chunked:
            self.send(chunk(body))
        else:
            self.send(body)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
        elif not self.done.done():
            if self.misbehave is not None:
                self.misbehave.finish(complete=True)
            else:
                self.end()
            self.done.set_result(not self.by_close and self.parser.should_keep_alive())

    # The client's side, for Misbehave.

    def write(self, data: bytes) -> None:
        self.send(chunk(data) if self.chunked else data)

    def end(self) -> None:
        if self.chunked:
            self.send(END)

    def abort(self) -> None:
        self.client.abort()

    def cut_upstream(self) -> None:
        self.cut = True
        self.upstream.abort()

    def throttle(self, on: bool) -> None:
        self.upstream.hold("queue", on)
