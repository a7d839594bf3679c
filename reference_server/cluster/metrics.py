"""The router's /metrics: its own series (requests routed, retried elsewhere and failed, per
replica; each replica up or not), then every replica's own, each series labelled `replica`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from reference_server.cluster.supervisor import Replica

RESULTS = ("routed", "retried", "failed")
SCRAPE_TIMEOUT_S = 2.0
SUFFIXES = ("_total", "_created", "_bucket", "_count", "_sum", "_info", "_gcount", "_gsum")  # a family's samples


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
        return generate_latest(self.registry) + merged(zip(live, texts, strict=True)).encode()


def _routable(r: Replica) -> Callable[[], float]:
    return lambda: float(r.routable)


async def _scrape(client: httpx.AsyncClient, r: Replica) -> str:
    try:
        response = await client.get(r.url + "/metrics", timeout=SCRAPE_TIMEOUT_S)
    except httpx.HTTPError:
        return ""  # gone or hung: its series are absent from this scrape, as a failed target's are
    return response.text if response.status_code == 200 else ""


def merged(scraped: Iterable[tuple[Replica, str]]) -> str:
    """Every replica's exposition as one: each family's HELP and TYPE once, then every replica's
    samples, each with its `replica` label and its name as the engine wrote it. By hand: the client
    library's parser and writer rename a counter NAME_total, and dcgm-exporter's counters have no
    such suffix."""
    families: dict[str, tuple[list[str], list[str]]] = {}  # name -> (HELP and TYPE lines, samples)
    for r, text in scraped:
        current = ""
        for line in text.splitlines():
            if line.startswith(("# HELP ", "# TYPE ")):
                current = line.split(" ", 3)[2]
                head = families.setdefault(current, ([], []))[0]
                if not any(h.startswith(line[:7]) for h in head):
                    head.append(line)
            elif line and not line.startswith("#"):
                name = _name(line)
                if name != current and name not in {current + s for s in SUFFIXES}:
                    current = name  # a sample of no HELP or TYPE: a family of its own (untyped)
                families.setdefault(current, ([], []))[1].append(with_replica(line, r.index))
    return "".join(f"{line}\n" for head, samples in families.values() for line in (*head, *samples))


def _name(line: str) -> str:
    return line.split("{", 1)[0].split(" ", 1)[0]


def with_replica(line: str, index: int) -> str:
    """A sample line with `replica="index"` first among its labels."""
    end = len(_name(line))
    label = f'replica="{index}"'
    if line[end : end + 1] != "{":
        return f"{line[:end]}{{{label}}}{line[end:]}"
    rest = line[end + 1 :]
    return f"{line[:end]}{{{label}{'' if rest.startswith('}') else ','}{rest}"
