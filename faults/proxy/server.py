"""What every connection shares (the upstream's pool, the fault and its random numbers), the control
API, and `serve`."""

from __future__ import annotations

import asyncio
import gc
import json
import random
import signal
from collections.abc import Callable
from dataclasses import asdict

import uvloop

from faults.proxy.address import Target, listen_address, upstream_target
from faults.proxy.client import Client
from faults.proxy.exchange import Shape
from faults.proxy.fault import SSEFault
from faults.proxy.upstream import Pool
from faults.proxy.wire import HEAD_TIMEOUT_S, response
from llmchaos.errors import UsageError
from llmchaos.net import is_loopback

CONTROL_METHODS = "GET, PUT, DELETE"


class Proxy:
    def __init__(self, target: Target, seed: int = 0, header_timeout: float = HEAD_TIMEOUT_S) -> None:
        self.target, self.pool, self.header_timeout = target, Pool(target), header_timeout
        self.fault: SSEFault | None = None
        self.rng = random.Random(seed)

    def shape(self, lang: bytes | None) -> Shape | None:
        """The fault on a request in `lang` (its x-llmchaos-lang), if one applies."""
        f = self.fault
        if f is None or not f.applies_to(None if lang is None else lang.decode("latin-1")):
            return None
        return f, self.rng

    @staticmethod
    def injected_error(fault: SSEFault, close: bool) -> bytes:
        kind = "rate_limit_error" if fault.error_status == 429 else "server_error"
        error = {"message": f"injected by llmchaos fault {fault.name}", "type": kind, "code": fault.error_status}
        return response(fault.error_status, {"error": error}, {"retry-after": str(fault.retry_after)}, close)

    def control(self, method: bytes, body: bytes, peer: str, close: bool, any_peer: bool = False) -> bytes:
        """`GET|PUT|DELETE /_llmchaos/fault` (and HEAD), from the loopback only unless `any_peer` (the
        control listener, which a cluster's NetworkPolicy fences)."""
        if not (any_peer or is_loopback(peer)):
            return response(403, {"error": "control API is loopback-only"}, close=close)
        if method == b"PUT":
            try:
                data = json.loads(body)
            except (ValueError, RecursionError) as e:
                return response(400, {"error": f"invalid JSON: {e}"}, close=close)
            try:
                fault = SSEFault.from_json(data)
            except ValueError as e:
                return response(400, {"error": str(e)}, close=close)
            self.fault, self.rng = fault, random.Random(fault.seed)
        elif method == b"DELETE":
            self.fault = None
        elif method not in (b"GET", b"HEAD"):
            return response(405, {"error": f"use {CONTROL_METHODS}"}, {"allow": CONTROL_METHODS}, close)
        return response(
            200, {"active": self.fault is not None, "fault": asdict(self.fault) if self.fault else None}, close=close
        )


async def _listen(address: tuple[str, int], client: Callable[[], Client], flag: str) -> asyncio.Server:
    try:
        return await asyncio.get_running_loop().create_server(client, *address)
    except OSError as e:
        host = f"[{address[0]}]" if ":" in address[0] else address[0]
        raise UsageError(f"cannot listen on {host}:{address[1]}: {e.strerror or e}", field=flag) from None


async def main(
    listen: tuple[str, int],
    target: Target,
    seed: int,
    header_timeout: float,
    control: tuple[str, int] | None = None,
) -> None:
    proxy, loop, stop = Proxy(target, seed, header_timeout), asyncio.get_running_loop(), asyncio.Event()
    servers = [await _listen(listen, lambda: Client(proxy), "--listen")]
    if control is not None:
        servers.append(await _listen(control, lambda: Client(proxy, control_only=True), "--control-listen"))
    gc.freeze()  # what startup made is never collected: full collections stay short
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def serve(
    listen: str, upstream: str, seed: int = 0, header_timeout: float = HEAD_TIMEOUT_S, control: str | None = None
) -> None:
    """Run the proxy until SIGINT or SIGTERM; a bad address is a UsageError before anything starts.
    `control`: also answer the control API alone there, from any peer."""
    control_at = listen_address(control, "--control-listen") if control else None
    uvloop.run(main(listen_address(listen), upstream_target(upstream), seed, header_timeout, control_at))
