"""Run the reference server under uvicorn, draining on SIGTERM/SIGINT (503 to new requests)."""

from __future__ import annotations

import asyncio
import logging
import socket
from types import FrameType

import uvicorn

from reference_server.app import create_app
from reference_server.config import EngineConfig, ServerOptions
from reference_server.disagg.kv_server import Wire
from reference_server.disagg.role import Options, Role
from reference_server.engine import Engine
from reference_server.executors import Executor
from reference_server.http_guard import guarded

log = logging.getLogger("llmchaos.server")


class DrainingServer(uvicorn.Server):
    """First signal: stop admitting (503), let running requests finish, then exit. Second: exit now."""

    def __init__(self, config: uvicorn.Config, engine: Engine, drain_timeout_s: float) -> None:
        super().__init__(config)
        self.engine, self.drain_timeout_s = engine, drain_timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self._loop
        if self.engine.state == "draining" or loop is None or self.engine.state == "starting":
            return super().handle_exit(sig, frame)
        self.engine.state = "draining"
        loop.call_soon_threadsafe(lambda: loop.create_task(self._drain()))

    async def _drain(self) -> None:
        try:
            await asyncio.wait_for(self.engine.wait_idle(), self.drain_timeout_s)
        except TimeoutError:
            log.warning("drain timed out after %.1fs; exiting with requests in flight", self.drain_timeout_s)
        self.should_exit = True  # a clean drain exits 0: the signal is not re-raised


def serve(
    engine_cfg: EngineConfig,
    executor: Executor,
    host: str,
    port: int,
    opts: ServerOptions,
    startup_delay_s: float = 0.0,
    drain_timeout_s: float = 30.0,
    log_level: str = "warning",
    disagg: tuple[Options, Wire] | None = None,
) -> None:
    """Serve one engine; `disagg`: its part in a disaggregated cluster (reference_server/disagg)."""
    engine = Engine(engine_cfg, executor)
    role = Role(*disagg, engine.metrics.registry) if disagg else None
    app = create_app(engine, opts, startup_delay_s, role)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded(opts.header_timeout_s, opts.max_header_bytes),
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    DrainingServer(config, engine, drain_timeout_s).run()
