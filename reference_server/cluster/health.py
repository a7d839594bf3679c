"""The router's health checks: every replica's /healthz each INTERVAL_S; a replica is routable
while its last one passed, and out (until one passes) the moment a request cannot reach it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from reference_server.cluster.supervisor import Replica, Supervisor

INTERVAL_S = 1.0  # as often as a readiness probe at its tightest; a kill is found by the next request sooner
TIMEOUT_S = 2.0  # an engine's /healthz runs a one-token request through it: a busy one takes a while


async def check(client: httpx.AsyncClient, sup: Supervisor, r: Replica) -> None:
    if sup.exited(r):  # as a refused connection would tell
        r.healthy = False
        return
    try:
        ok = (await client.get(r.url + "/healthz", timeout=TIMEOUT_S)).status_code == 200
    except httpx.HTTPError:
        ok = False
    if sup.exited(r):  # killed while it was checked
        r.healthy = False
        return
    r.healthy = ok
    if ok and r.state in ("starting", "down"):
        r.state, r.ever_up = "up", True


async def forever(client: httpx.AsyncClient, sup: Supervisor, failed: Callable[[], None]) -> None:
    """Each replica checked on its own clock (a hung one's check holds up no other's); a paused one
    once it is found out, then not again until it is resumed. `failed` is called, and the checks
    end, when an engine exits before it was ever up (the cluster cannot start)."""

    async def watch(r: Replica) -> None:
        while sup.failed is None:
            if r.state != "paused" or r.healthy:
                await check(client, sup, r)
            await asyncio.sleep(INTERVAL_S)
        failed()

    await asyncio.gather(*(watch(r) for r in sup.replicas))
