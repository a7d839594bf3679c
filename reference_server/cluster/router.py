"""The router in front of a cluster's engines: each API request sent to the replica its policy
picks (another when no response head comes back), a disaggregated one first to a prefill engine
(its KV kept under a fresh transfer id) and then to a decode engine (which pulls that KV), the
answer streamed back with the replicas that served it named in its head."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Callable

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reference_server.api.common import APIError
from reference_server.app import render_error
from reference_server.body_limit import BodyLimit
from reference_server.cluster import health, relay
from reference_server.cluster.admin import RouterAdmin
from reference_server.cluster.metrics import RouterMetrics
from reference_server.cluster.policies import LeastLoaded, Policy, Prefix, make, prompt_text
from reference_server.cluster.supervisor import Replica, Supervisor
from reference_server.config import ServerOptions
from reference_server.disagg.role import KV_FROM, KV_TRANSFER
from reference_server.http_guard import guarded

REPLICA = "x-llmchaos-replica"  # the engine that streamed the answer (disaggregated: the decode one)
PREFILL_REPLICA = "x-llmchaos-prefill-replica"
FAILOVER = "x-llmchaos-failover"  # engines tried before the one that answered, when any were


class Cluster:
    def __init__(self, replicas: list[Replica], policy: str) -> None:
        self.replicas, self.policy_name = replicas, policy
        self.policy = make(policy, sum(r.role != "decode" for r in replicas))
        self.spread = LeastLoaded()  # decode engines: whatever the policy (the prefix cache is prefill's)
        self.sup = Supervisor(replicas, self._lost)
        self.metrics = RouterMetrics(replicas)
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=None, max_keepalive_connections=512))
        self.started = False  # every replica has been up: the router is ready from then on
        self.stop: Callable[[], None] = lambda: None  # ends the router's server (a failed start)

    def _lost(self, r: Replica) -> None:
        if isinstance(self.policy, Prefix):
            self.policy.forget(r.index)

    def roles(self) -> set[str]:
        return {r.role for r in self.replicas}

    async def route(self, request: Request) -> Response:
        body = await request.body()
        if request.method == "GET":
            return await self._to(self.replicas, self.spread, request, body, "", {}, 0, {})
        prompt = prompt_text(body) if isinstance(self.policy, Prefix) else ""
        if "prefill" not in self.roles():
            return await self._to(self.replicas, self.policy, request, body, prompt, {}, 0, {})
        return await self._disaggregated(request, body, prompt)

    async def _disaggregated(self, request: Request, body: bytes, prompt: str) -> Response:
        """Prefill on one engine (its whole response read: the prompt's KV is then ready to send),
        then decode on another, which pulls the KV from the first's KV server."""
        transfer, tried = uuid.uuid4().hex, 0
        order = self.policy.order([r for r in self.replicas if r.role == "prefill" and r.routable], prompt)
        for k, p in enumerate(order):
            answer = await relay.send(self.client, p, request, body, relay.forwarded(request, {KV_TRANSFER: transfer}))
            if answer is not None:
                answer = await relay.whole(answer, p)
            if answer is None:
                tried += 1
                self._unreachable(p, last=k == len(order) - 1)
                continue
            self.metrics.count(p, "routed")
            self.policy.sent(p, prompt)
            head = {PREFILL_REPLICA: str(p.index)}
            if answer.status_code != 200:  # the prompt's own refusal (400, 429): decode would refuse it too
                headers = {k: v for k, v in answer.headers.items() if k not in relay.HOP}
                return Response(answer.content, answer.status_code, headers | head)
            decode = [r for r in self.replicas if r.role == "decode"]
            more = {KV_FROM: f"127.0.0.1:{p.kv_port}/{transfer}"}
            return await self._to(decode, self.spread, request, body, "", more, tried, head)
        raise APIError("UNAVAILABLE", f"no prefill engine answered ({tried} tried)", retry_after=1)

    async def _to(
        self,
        pool: list[Replica],
        policy: Policy,
        request: Request,
        body: bytes,
        prompt: str,
        more: dict[str, str],
        tried: int,
        head: dict[str, str],
    ) -> Response:
        """The first engine of `pool`, in `policy`'s order, to give a response head: its response,
        streamed back; 503 when none does."""
        order = policy.order([r for r in pool if r.routable], prompt)
        for k, r in enumerate(order):
            answer = await relay.send(self.client, r, request, body, relay.forwarded(request, more))
            if answer is None:
                tried += 1
                self._unreachable(r, last=k == len(order) - 1)
                continue
            self.metrics.count(r, "routed")
            policy.sent(r, prompt)
            named = head | {REPLICA: str(r.index)} | ({FAILOVER: str(tried)} if tried else {})
            return relay.Relayed(answer, r, named, functools.partial(self.metrics.count, r, "failed"))
        raise APIError("UNAVAILABLE", f"no replica answered ({tried} tried)", retry_after=1)

    def _unreachable(self, r: Replica, last: bool) -> None:
        """An attempt that got no head: the replica is out until its health check passes."""
        r.healthy = False
        self.metrics.count(r, "failed" if last else "retried")

    async def healthz(self, request: Request) -> Response:
        if not self.started:
            self.started = all(r.state == "up" for r in self.replicas)
        ready = self.started and all(any(r.routable for r in self.replicas if r.role == k) for k in self.roles())
        status = "ready" if ready else "degraded" if self.started else "starting"
        body = {"status": status, "router": self.policy_name, "replicas": [r.entry() for r in self.replicas]}
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics_endpoint(self, request: Request) -> Response:
        body = await self.metrics.exposition(self.client, self.replicas)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


def create_app(cluster: Cluster, opts: ServerOptions, drain_timeout_s: float) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        cluster.sup.start_all()
        checks = asyncio.create_task(health.forever(cluster.client, cluster.sup, cluster.stop))
        try:
            yield
        finally:
            checks.cancel()
            await asyncio.to_thread(cluster.sup.stop_all, drain_timeout_s)
            await cluster.client.aclose()

    api = ["GET", "POST"]
    routes = [
        Route("/v1/chat/completions", cluster.route, methods=["POST"]),
        Route("/v1/completions", cluster.route, methods=["POST"]),
        Route("/v1/models", cluster.route, methods=["GET"]),
        Route("/v1beta/models", cluster.route, methods=["GET"]),
        Route("/v1beta/models/{target:path}", cluster.route, methods=api),
        Route("/metrics", cluster.metrics_endpoint, methods=["GET"]),
        Route("/healthz", cluster.healthz, methods=["GET"]),
        Route("/health", cluster.healthz, methods=["GET"]),
        *RouterAdmin(cluster, opts).routes(),
    ]
    handlers = {APIError: render_error, Exception: render_error}
    limit = Middleware(BodyLimit, max_bytes=opts.max_body_bytes)
    return Starlette(routes=routes, middleware=[limit], lifespan=lifespan, exception_handlers=handlers)


def serve(cluster: Cluster, host: str, port: int, opts: ServerOptions, drain_s: float, log_level: str) -> None:
    app = create_app(cluster, opts, drain_s)
    http = guarded(opts.header_timeout_s, opts.max_header_bytes)
    config = uvicorn.Config(
        app, host=host, port=port, http=http, log_level=log_level, access_log=False, timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    cluster.stop = lambda: setattr(server, "should_exit", True)
    server.run()
    if cluster.sup.failed:
        raise SystemExit(f"llmchaos serve: {cluster.sup.failed}")
