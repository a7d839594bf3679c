"""The Starlette application: API routes, /metrics, /healthz, the admin API (device, faults), lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Literal

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import Field, model_validator
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llmchaos.net import is_loopback
from reference_server import gpu_telemetry
from reference_server.api.common import APIError, bearer, parse_body
from reference_server.api.gemini import GeminiAPI
from reference_server.api.openai import OpenAIAPI, Strict
from reference_server.body_limit import BodyLimit
from reference_server.config import ServerOptions
from reference_server.disagg.role import KVOutcome, Role
from reference_server.engine import Engine

if TYPE_CHECKING:
    from reference_server.executors.sim import SimDevice

PROBE_TTL_S = 5.0


class ClockLock(Strict):
    graphics_mhz: float


class NoFields(Strict):
    """A body that may be sent but says nothing (`{}`)."""


class LinkFault(Strict):
    action: Literal["delay", "loss", "partition"]
    delay_ms: Annotated[float, Field(gt=0, le=3_600_000)] | None = None
    loss_pct: Annotated[float, Field(gt=0, le=100)] | None = None

    @model_validator(mode="after")
    def _its_amount(self) -> LinkFault:
        for action, name in (("delay", "delay_ms"), ("loss", "loss_pct")):
            if (getattr(self, name) is None) == (self.action == action):
                raise ValueError(f"{name} goes with action {action}, and only with it")
        return self


def render_error(request: Request, exc: Exception) -> Response:
    """An APIError in the shape of the API the path belongs to; anything unforeseen as its INTERNAL.

    ASCII JSON, so that no text in a message (a client's, echoed back) can fail to encode."""
    if not isinstance(exc, APIError):  # Starlette logs it and re-raises after this response
        exc = APIError("INTERNAL", "internal server error")
    if request.url.path.startswith("/v1beta"):
        body = {"error": {"code": exc.status, "message": exc.message, "status": exc.kind}}
    else:
        kind = {
            "UNAUTHENTICATED": ("invalid_request_error", "invalid_api_key"),
            "NOT_FOUND": ("invalid_request_error", "model_not_found"),
            "RESOURCE_EXHAUSTED": ("rate_limit_error", "rate_limit_exceeded"),
            "UNAVAILABLE": ("server_error", "service_unavailable"),
            "DEADLINE_EXCEEDED": ("server_error", "timeout"),
            "INTERNAL": ("server_error", None),
            "PERMISSION_DENIED": ("permission_error", None),
        }
        typ, code = kind.get(exc.kind, ("invalid_request_error", None))
        body = {"error": {"message": exc.message, "type": typ, "param": exc.param, "code": code}}
    return Response(json.dumps(body), exc.status, exc.headers(), media_type="application/json")


class Health:
    """Liveness plus a real TTFT measured through the engine, cached for a few seconds."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._probe: dict | None = None
        self._lock = asyncio.Lock()

    async def probe(self) -> dict:
        async with self._lock:
            now = time.monotonic()
            if self._probe is None or now - self._probe["_at"] > PROBE_TTL_S:
                try:
                    ttft = await self.engine.probe_ttft()
                    self._probe = {"ttft_seconds": ttft, "ok": True, "_at": time.monotonic()}
                except TimeoutError:
                    self._probe = {"ttft_seconds": None, "ok": False, "error": "timeout", "_at": time.monotonic()}
            return {k: v for k, v in self._probe.items() if k != "_at"} | {
                "age_seconds": round(time.monotonic() - self._probe["_at"], 3)
            }

    async def endpoint(self, request: Request) -> Response:
        s = self.engine.scheduler
        body: dict = {
            "status": self.engine.state,
            "model": self.engine.cfg.model_name,
            "running": len(s.running),
            "waiting": len(s.waiting),
            "kv_cache_usage": round(s.blocks.usage, 4),
        }
        if self.engine.state != "ready":
            return JSONResponse(body, status_code=503, headers={"retry-after": "1"})
        body["latency_probe"] = await self.probe()
        return JSONResponse(body, status_code=200 if body["latency_probe"]["ok"] else 503)


def authorize(opts: ServerOptions, request: Request) -> None:
    """An admin call's checks: the API on (--admin-token), from loopback (unless allowed), its token."""
    if not opts.admin_token:
        raise APIError("PERMISSION_DENIED", "admin API disabled: start with --admin-token")
    host = request.client.host if request.client else ""
    if not opts.admin_allow_remote and not is_loopback(host):
        raise APIError("PERMISSION_DENIED", "admin API is loopback-only")
    token = bearer(request) or ""
    if not secrets.compare_digest(token.encode(), opts.admin_token.encode()):
        raise APIError("UNAUTHENTICATED", "invalid admin token")


class Admin:
    """The simulated device's clocks, set like `nvidia-smi -lgc/-rgc`, and the engine's fault `corrupt`
    (reference_server/corrupt.py): token, loopback only."""

    def __init__(self, engine: Engine, opts: ServerOptions) -> None:
        self.engine, self.opts = engine, opts

    def _check(self, request: Request) -> None:
        authorize(self.opts, request)

    def _device(self) -> SimDevice:
        """The executor's device, when it has a simulated one."""
        device = getattr(self.engine.executor, "device", None)
        if device is None:
            raise APIError("NOT_FOUND", "this executor has no simulated device")
        return device

    def _state(self) -> Response:
        d = self._device()
        return JSONResponse(
            {
                "graphics_mhz": d.clock_mhz,
                "min_graphics_mhz": d.min_clock_mhz,
                "max_graphics_mhz": d.max_clock_mhz,
                "locked": d.locked_mhz is not None,
                "slowdown": d.slowdown,
            }
        )

    async def endpoint(self, request: Request) -> Response:
        self._check(request)
        device = self._device()
        if request.method == "PUT":
            lock = await parse_body(request, ClockLock)
            try:
                device.lock(lock.graphics_mhz)
            except ValueError as e:
                raise APIError("INVALID_ARGUMENT", f"graphics_mhz: {e}", param="graphics_mhz") from None
        elif request.method == "DELETE":
            device.reset()
        return self._state()

    async def corrupt(self, request: Request) -> Response:
        """PUT sets the fault (an empty body or `{}`), DELETE clears it; each answers as GET does."""
        self._check(request)
        if request.method == "PUT":
            if await request.body():
                await parse_body(request, NoFields)
            try:
                self.engine.set_corrupt(True)
            except ValueError as e:
                raise APIError("NOT_FOUND", str(e)) from None
        elif request.method == "DELETE":
            self.engine.set_corrupt(False)
        return JSONResponse({"corrupt": self.engine.corrupt})

    async def reset_prefix_cache(self, request: Request) -> Response:
        """POST forgets the prefix cache (vLLM's route; the `cache_flush` fault); GET reads the resets."""
        self._check(request)
        blocks = self.engine.scheduler.blocks
        dropped = blocks.reset_prefix_cache() if request.method == "POST" else None
        return JSONResponse(
            {"resets": blocks.resets, **({} if dropped is None else {"success": True, "blocks_dropped": dropped})}
        )

    async def kv_link(self, request: Request) -> Response:
        """A prefill engine's KV link (reference_server/disagg/link.py): PUT sets its fault, DELETE
        clears it; each answers as GET does."""
        self._check(request)
        link = request.app.state.disagg.server.link
        if request.method == "PUT":
            fault = await parse_body(request, LinkFault)
            link.set(fault.action, fault.delay_ms or 0.0, fault.loss_pct or 0.0)
        elif request.method == "DELETE":
            link.set(None)
        return JSONResponse(link.state())


def create_app(
    engine: Engine, opts: ServerOptions | None = None, startup_delay_s: float = 0.0, role: Role | None = None
) -> Starlette:
    """The engine's server; `role`: its part in a disaggregated cluster (None: a whole engine)."""
    opts = opts or ServerOptions()
    oai, gem, health, admin = (
        OpenAIAPI(engine, opts.api_key, opts.prompt_tokens_details),
        GeminiAPI(engine, opts.api_key),
        Health(engine),
        Admin(engine, opts),
    )

    telemetry = gpu_telemetry.of(engine.executor, opts.replica)  # dcgm-exporter's exposition, after the engine's

    async def metrics(request: Request) -> Response:
        body = generate_latest(engine.metrics.registry) + telemetry.exposition()
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def warm_up() -> None:
        await asyncio.sleep(startup_delay_s)  # the sim's model-load time; 503 meanwhile
        await engine.probe_ttft(timeout=60.0)  # one real request through the engine
        if engine.state == "starting":
            engine.state = "ready"

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine.start()
        if role is not None:
            await role.start()
        warming = asyncio.create_task(warm_up())
        yield
        warming.cancel()
        if role is not None:
            await role.stop()
        await engine.stop()

    routes = [
        Route("/v1/chat/completions", oai.chat, methods=["POST"]),
        Route("/v1/completions", oai.completions, methods=["POST"]),
        Route("/v1/models", oai.models, methods=["GET"]),
        Route("/v1beta/models", gem.models, methods=["GET"]),
        Route("/v1beta/models/{target:path}", gem.dispatch, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/healthz", health.endpoint, methods=["GET"]),
        Route("/health", health.endpoint, methods=["GET"]),
        Route("/admin/device/clocks", admin.endpoint, methods=["GET", "PUT", "DELETE"]),
        Route("/admin/faults/corrupt", admin.corrupt, methods=["GET", "PUT", "DELETE"]),
        Route("/reset_prefix_cache", admin.reset_prefix_cache, methods=["GET", "POST"]),
    ]
    middleware = [Middleware(BodyLimit, max_bytes=opts.max_body_bytes)]
    if role is not None:
        middleware.append(Middleware(KVOutcome))
        if role.server is not None:
            routes.append(Route("/admin/kv_link", admin.kv_link, methods=["GET", "PUT", "DELETE"]))
    handlers = {APIError: render_error, Exception: render_error}
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan, exception_handlers=handlers)
    app.state.disagg = role
    return app
