"""The SSE chaos proxy (`llmchaos proxy`): forwards to an upstream and, while a fault is active,
misbehaves per SSE event the way real gateways and networks do.

A fault is set, read back and cleared over the proxy's own loopback-only control API
(`PUT|GET|DELETE /_llmchaos/fault`), so the schedule runner can apply and revert it like any
other injector. With no fault active, events are forwarded as they arrive.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
from dataclasses import asdict, dataclass, field, fields

from aiohttp import ClientSession, ClientTimeout, web

CONTROL = "/_llmchaos/fault"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "trailer",
              "upgrade", "proxy-authorization", "proxy-authenticate", "content-encoding"}


@dataclass
class SSEFault:
    """What a fault window does to the streams that start while it is active."""

    name: str = "sse"
    drop_ratio: float = 0.0  # drop this fraction of content events (seeded)
    first_event_delay: float = 0.0  # seconds before the first event is forwarded
    jitter: float = 0.0  # each event waits uniform(0, jitter) seconds
    cut_after: int = 0  # end the stream after this many events (0: never)
    reset: bool = False  # with cut_after: reset the connection instead of closing it
    bandwidth: float = 0.0  # bytes per second per stream (0: unlimited)
    error_ratio: float = 0.0  # answer this fraction of requests with error_status
    error_status: int = 429
    retry_after: int = 1
    langs: list[str] = field(default_factory=list)  # only requests in these languages (empty: all)
    seed: int = 0

    @classmethod
    def from_json(cls, data: dict) -> "SSEFault":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
        fault = cls(**data)
        for name in ("drop_ratio", "error_ratio"):
            if not 0.0 <= getattr(fault, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")
        for name in ("first_event_delay", "jitter", "bandwidth", "cut_after"):
            if getattr(fault, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if fault.error_status not in (429, 500, 502, 503, 504):
            raise ValueError("error_status must be one of 429, 500, 502, 503, 504")
        return fault

    def applies_to(self, lang: str | None) -> bool:
        return not self.langs or lang in self.langs


class Proxy:
    def __init__(self, upstream: str, seed: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.fault: SSEFault | None = None
        self.rng = random.Random(seed)
        self.session: ClientSession | None = None

    async def start(self, app: web.Application) -> None:
        self.session = ClientSession(timeout=ClientTimeout(total=None, sock_connect=10), auto_decompress=False)

    async def stop(self, app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    async def control(self, request: web.Request) -> web.Response:
        try:
            loopback = ipaddress.ip_address(request.remote or "").is_loopback
        except ValueError:  # not an IP address: not known to be local
            loopback = False
        if not loopback:
            return web.json_response({"error": "control API is loopback-only"}, status=403)
        if request.method == "PUT":
            try:
                fault = SSEFault.from_json(await request.json())
            except (ValueError, TypeError) as e:
                return web.json_response({"error": str(e)}, status=400)
            self.fault, self.rng = fault, random.Random(fault.seed)
        elif request.method == "DELETE":
            self.fault = None
        return web.json_response({"active": self.fault is not None,
                                  "fault": asdict(self.fault) if self.fault else None})

    async def forward(self, request: web.Request) -> web.StreamResponse:
        fault = self.fault if self.fault and self.fault.applies_to(request.headers.get("x-llmchaos-lang")) \
            else None
        if fault and fault.error_ratio and self.rng.random() < fault.error_ratio:
            return web.json_response({"error": {"message": f"injected by llmchaos fault {fault.name}",
                                                "type": "rate_limit_error" if fault.error_status == 429
                                                else "server_error", "code": fault.error_status}},
                                     status=fault.error_status, headers={"Retry-After": str(fault.retry_after)})
        assert self.session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self.session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                        data=await request.read()) as up:
            out = web.StreamResponse(status=up.status, headers={k: v for k, v in up.headers.items()
                                                               if k.lower() not in HOP_BY_HOP})
            await out.prepare(request)
            if "text/event-stream" not in up.headers.get("content-type", "") or fault is None:
                async for chunk in up.content.iter_any():
                    await out.write(chunk)
            else:
                await self._events(request, up, out, fault)
            await out.write_eof()
            return out

    async def _events(self, request: web.Request, up, out: web.StreamResponse, f: SSEFault) -> None:  # noqa: ANN001
        """Forward event by event (an event ends with a blank line), misbehaving as `f` says."""
        buf, sent = b"", 0
        if f.first_event_delay:
            await asyncio.sleep(f.first_event_delay)
        async for chunk in up.content.iter_any():
            buf += chunk.replace(b"\r\n", b"\n")
            *events, buf = buf.split(b"\n\n")
            for ev in events:
                content = ev.startswith(b"data:") and b"[DONE]" not in ev
                if content and f.drop_ratio and self.rng.random() < f.drop_ratio:
                    continue
                if f.jitter:
                    await asyncio.sleep(self.rng.uniform(0.0, f.jitter))
                data = ev + b"\n\n"
                if f.bandwidth:
                    await asyncio.sleep(len(data) / f.bandwidth)
                await out.write(data)
                sent += 1
                if f.cut_after and sent >= f.cut_after:
                    if f.reset and request.transport is not None:
                        request.transport.abort()
                    return
        if buf:
            await out.write(buf)


def app(upstream: str, seed: int = 0) -> web.Application:
    proxy = Proxy(upstream, seed)
    application = web.Application()
    application.on_startup.append(proxy.start)
    application.on_cleanup.append(proxy.stop)
    application.router.add_route("*", CONTROL, proxy.control)
    application.router.add_route("*", "/{tail:.*}", proxy.forward)
    return application


def serve(listen: str, upstream: str, seed: int = 0) -> None:
    host, _, port = listen.rpartition(":")
    web.run_app(app(upstream, seed), host=host or "127.0.0.1", port=int(port), print=None,
                access_log=None, handle_signals=True)
