"""The router's /metrics: its own series (requests routed, retried elsewhere and failed, per
replica; each replica up or not), then every replica's own, each series labelled `replica`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from reference_server.cluster.supervisor import Replica

RESULTS = ("routed", "retried", "failed")
SCRAPE_TIMEOUT_S = 2.0


class RouterMetrics:
    def __init__(self, replicas: list[Replica]) -> None:
        self.registry = CollectorRegistry()
        requests = Counter(
            "llmchaos_router_requests",
            "Requests by replica: routed (its head came back), retried (an attempt on it failed before "
            "any head, and went to another), failed (it failed with nowhere left to go, or cut its stream).",
            ["replica", "result"],
            registry=self.registry,
        )
        self.requests = {(r.index, k): requests.labels(str(r.index), k) for r in replicas for k in RESULTS}
        up = Gauge("llmchaos_router_replica_up", "1 when the replica is routable.", ["replica"], registry=self.registry)
        for r in replicas:
            up.labels(str(r.index)).set_function(_routable(r))

    def count(self, r: Replica, result: str) -> None:
        self.requests[r.index, result].inc()

    async def exposition(self, client: httpx.AsyncClient, replicas: list[Replica]) -> bytes:
        live = [r for r in replicas if r.state in ("up", "starting")]
        texts = await asyncio.gather(*(_scrape(client, r) for r in live))
        merged = CollectorRegistry(auto_describe=False)
        merged.register(_Merged(labelled(zip(live, texts, strict=True))))
        return generate_latest(self.registry) + generate_latest(merged)


def _routable(r: Replica) -> Callable[[], float]:
    return lambda: float(r.routable)


async def _scrape(client: httpx.AsyncClient, r: Replica) -> str:
    try:
        response = await client.get(r.url + "/metrics", timeout=SCRAPE_TIMEOUT_S)
    except httpx.HTTPError:
        return ""  # gone or hung: its series are absent from this scrape, as a failed target's are
    return response.text if response.status_code == 200 else ""


def labelled(scraped: Iterable[tuple[Replica, str]]) -> list[Metric]:
    """Each family once, holding every replica's samples with its `replica` label."""
    families: dict[str, Metric] = {}
    for r, text in scraped:
        for fam in text_string_to_metric_families(text):
            into = families.setdefault(fam.name, Metric(fam.name, fam.documentation, fam.type, fam.unit))
            into.samples += [s._replace(labels={**s.labels, "replica": str(r.index)}) for s in fam.samples]
    return list(families.values())


class _Merged:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families
