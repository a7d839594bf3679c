"""One request sent on to one engine, and its response passed back as it comes (no buffering):
`send` returns None when the attempt failed before any response head (the router may try another
engine); a stream cut after its head is cut for the client too (no terminator: truncated)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from reference_server.cluster.supervisor import Replica

HOP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "te", "upgrade", "proxy-connection"}
TIMEOUT = httpx.Timeout(None, connect=2.0)  # a stream may wait long for its first token (hang: the KV timeout)


OURS = "x-llmchaos-kv"  # the router's own to its engines: a client's are dropped, never passed on


def forwarded(request: Request, more: dict[str, str] | None = None) -> dict[str, str]:
    """The request's headers for an engine: all but hop-by-hop ones and the router's own, plus `more`."""
    kept = {k: v for k, v in request.headers.items() if k not in HOP and not k.startswith(OURS)}
    return kept | (more or {})


async def send(
    client: httpx.AsyncClient, r: Replica, request: Request, body: bytes, headers: dict[str, str]
) -> httpx.Response | None:
    """The engine's response head (its body still to read), or None: no head came (refused, reset)."""
    url = r.url + request.url.path + (f"?{request.url.query}" if request.url.query else "")
    outgoing = client.build_request(request.method, url, content=body, headers=headers, timeout=TIMEOUT)
    r.in_flight += 1
    try:
        return await client.send(outgoing, stream=True)
    except httpx.TransportError:
        r.in_flight -= 1
        return None


async def whole(response: httpx.Response, r: Replica) -> httpx.Response | None:
    """The engine's response read to its end (None: its body broke off), the replica's request
    counted out either way."""
    try:
        await response.aread()
    except httpx.TransportError:
        return None
    finally:
        r.in_flight -= 1
        await response.aclose()
    return response


class Relayed(StreamingResponse):
    """The engine's response to the client as its bytes come; `cut` is called when its stream
    breaks. However it ends (the client gone before a byte was sent too), the engine's response is
    closed and the replica's count of requests in flight goes down."""

    def __init__(self, response: httpx.Response, r: Replica, more: dict[str, str], cut: Callable[[], None]) -> None:
        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_raw():
                    yield chunk
            except httpx.TransportError:
                cut()
                raise  # the client's connection is closed mid-body, as the engine's was

        headers = {k: v for k, v in response.headers.items() if k not in HOP} | more
        super().__init__(body(), status_code=response.status_code, headers=headers)
        self.upstream, self.replica = response, r

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.replica.in_flight -= 1
            await self.upstream.aclose()
