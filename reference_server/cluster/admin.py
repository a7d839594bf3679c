"""The router's admin API (the cluster fault kinds' target; token and loopback as an engine's):
its replicas killed, paused, restarted and undone; taken out of the pool and put back; the
replica holding a prompt's prefix; and the engines' own admin calls fanned out (the device's
clocks, `corrupt` and the prefix cache's reset to every replica, the KV link to the prefill engines)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reference_server.api.common import APIError, parse_body
from reference_server.api.openai import Strict
from reference_server.app import authorize
from reference_server.cluster import relay
from reference_server.cluster.policies import BLOCK_CHARS, Prefix
from reference_server.cluster.supervisor import Replica
from reference_server.config import ServerOptions

if TYPE_CHECKING:
    from reference_server.cluster.router import Cluster

FAN_OUT_TIMEOUT_S = 10.0


class ReplicaAction(Strict):
    action: Literal["kill", "pause", "restart"]


class Holding(Strict):
    prompt: str


class RouterAdmin:
    def __init__(self, cluster: Cluster, opts: ServerOptions) -> None:
        self.cluster, self.opts = cluster, opts

    def routes(self) -> list[Route]:
        every = ["GET", "PUT", "DELETE"]
        return [
            Route("/admin/replicas", self.replicas, methods=["GET"]),
            Route("/admin/replicas/{index}", self.replica, methods=every),
            Route("/admin/router/pool/{index}", self.pool, methods=["PUT", "DELETE"]),
            Route("/admin/router/holder", self.holder, methods=["POST"]),
            Route("/admin/kv_link", self._fan_out(lambda r: r.role == "prefill", "prefill engine"), methods=every),
            Route("/admin/device/clocks", self._fan_out(lambda r: True, "replica"), methods=every),
            Route("/admin/faults/corrupt", self._fan_out(lambda r: True, "replica"), methods=every),
            Route(
                "/reset_prefix_cache", self._fan_out(lambda r: True, "replica", self._forget), methods=["GET", "POST"]
            ),
        ]

    def _forget(self, request: Request, reset: list[Replica]) -> None:
        """The prefix policy forgets what the replicas whose cache was reset held."""
        if request.method == "POST" and isinstance(self.cluster.policy, Prefix):
            for r in reset:
                self.cluster.policy.forget(r.index)

    def _replica(self, request: Request) -> Replica:
        authorize(self.opts, request)
        replicas, text = self.cluster.replicas, request.path_params["index"]
        if not text.isdigit() or int(text) >= len(replicas):
            raise APIError("NOT_FOUND", f"no replica {text} (replicas 0 to {len(replicas) - 1})")
        return replicas[int(text)]

    async def replicas(self, request: Request) -> Response:
        authorize(self.opts, request)
        return JSONResponse(
            {"router": self.cluster.policy_name, "replicas": [r.entry() for r in self.cluster.replicas]}
        )

    async def replica(self, request: Request) -> Response:
        """PUT kills, pauses or restarts it; DELETE undoes that (it is `starting` until it is healthy)."""
        r, sup = self._replica(request), self.cluster.sup
        if request.method == "PUT":
            action = (await parse_body(request, ReplicaAction)).action
            await asyncio.to_thread({"kill": sup.kill, "pause": sup.pause, "restart": sup.restart}[action], r)
        elif request.method == "DELETE":
            sup.undo(r)
        return JSONResponse(r.entry())

    async def pool(self, request: Request) -> Response:
        r = self._replica(request)
        r.in_pool = request.method == "DELETE"
        return JSONResponse(r.entry())

    async def holder(self, request: Request) -> Response:
        authorize(self.opts, request)
        policy = self.cluster.policy
        if not isinstance(policy, Prefix):
            raise APIError("NOT_FOUND", f"the router's policy is {self.cluster.policy_name}, not prefix: no holder")
        prompt = (await parse_body(request, Holding)).prompt
        if len(prompt) < BLOCK_CHARS:
            raise APIError("INVALID_ARGUMENT", f"prompt: under one block ({BLOCK_CHARS} characters)", param="prompt")
        i, n = policy.holder(prompt)
        return JSONResponse({"replica": i, "blocks": n})

    def _fan_out(
        self, which: Callable[[Replica], bool], what: str, then: Callable[[Request, list[Replica]], None] | None = None
    ) -> Callable:
        """An engine's admin call, made on each live replica `which` takes: the first's answer, each's
        under `replicas`; an engine's refusal as it is. `then`: the router's own part, once all took it."""

        async def endpoint(request: Request) -> Response:
            authorize(self.opts, request)
            body, headers = await request.body(), relay.forwarded(request)
            live = [r for r in self.cluster.replicas if which(r) and r.state in ("up", "starting")]
            answers = await asyncio.gather(*(self._call(r, request, body, headers) for r in live))
            reached = [(r, a) for r, a in zip(live, answers, strict=True) if a is not None]
            if not reached:
                raise APIError("UNAVAILABLE", f"no {what} is up to take {request.url.path}", retry_after=1)
            for _, a in reached:
                if a.status_code != 200:
                    return Response(a.content, a.status_code, media_type="application/json")
            each = {str(r.index): a.json() for r, a in reached}
            if then is not None:
                then(request, [r for r, _ in reached])
            return JSONResponse(reached[0][1].json() | {"replicas": each})

        return endpoint

    async def _call(self, r: Replica, request: Request, body: bytes, headers: dict) -> httpx.Response | None:
        try:
            return await self.cluster.client.request(
                request.method, r.url + request.url.path, content=body, headers=headers, timeout=FAN_OUT_TIMEOUT_S
            )
        except httpx.TransportError:
            return None  # gone: it holds no fault
