"""The router's health checks, as a load balancer's active ones: every replica's /healthz each
INTERVAL_S; a replica is in once one passes, out after DOWN_AFTER fail in a row (a process gone
counts as a refused check), and out at once when a request cannot reach it (passive)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import httpx

from reference_server.cluster.supervisor import Replica, Supervisor

INTERVAL_S = 1.0  # as often as a readiness probe at its tightest; a kill is found by the next request sooner
TIMEOUT_S = 2.0  # an engine's /healthz runs a one-token request through it: a busy one takes a while
DOWN_AFTER = 2  # failed checks in a row (Envoy's unhealthy_threshold; Kubernetes' failureThreshold is 3)


async def check(client: httpx.AsyncClient, sup: Supervisor, r: Replica) -> None:
    ok = False
    if not sup.exited(r):
        with contextlib.suppress(httpx.HTTPError):  # refused, reset, timed out: a failed check
            ok = (await client.get(r.url + "/healthz", timeout=TIMEOUT_S)).status_code == 200
        ok = ok and not sup.exited(r)  # not killed while it was checked
    r.failed_checks = 0 if ok else r.failed_checks + 1
    if ok:
        r.healthy = True
        if r.state in ("starting", "down"):
            r.state, r.ever_up = "up", True
    elif r.failed_checks >= DOWN_AFTER:
        r.healthy = False


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
