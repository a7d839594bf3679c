"""What a fault host may touch: its own allowlists, given on its command line and never widened by a
master. Deny by default, since it acts for whoever holds the secret: a kind works there only once an
option names what it may hit (qdiscs: `--allow-interface`/`--allow-netns`; GPU clocks: `--allow-gpu`,
or `--allow-sim URL` for a reference server's simulated device, which also lets `corrupt` and
`cache_flush` hit that server, and `replica`, `kv_link` and `router` the cluster a router there fronts; containers:
`--allow-docker`; SSE: `--allow-proxy HOST:PORT`). The injectors then apply the same allowlist as
in `faults run`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from faults import allow
from faults.allow import Allowlist
from llmchaos.errors import UsageError

# a reference server's admin API, by URL
SIM_KINDS = ("gpu_clock", "corrupt", "replica", "kv_link", "router", "cache_flush")


@dataclass(frozen=True)
class Reach:
    allow: Allowlist
    qdisc: bool = False  # netem and tbf: some interface or namespace was allowed
    sims: frozenset[str] = frozenset()  # reference servers' base URLs: their admin API's faults
    proxies: frozenset[str] = frozenset()  # SSE proxies (HOST:PORT) whose control API may be used
    docker: bool = False  # containers on this host's daemon (DOCKER_HOST or the local socket)

    def refusal(self, kind: str, target: dict[str, Any]) -> str | None:
        """Why this host will not touch `target` with `kind`, or None (the injector checks the rest)."""
        if kind in ("netem", "tbf"):
            return None if self.qdisc else "this fault host allows no interface (--allow-interface, --allow-netns)"
        if kind in SIM_KINDS and "sim" in target:
            sim = str(target["sim"]).rstrip("/")
            return None if sim in self.sims else f"simulated device {sim} is not in this host's allowlist (--allow-sim)"
        if kind == "gpu_clock":
            gpu = target.get("gpu")
            if not self.allow.gpus:
                return "this fault host allows no GPU (--allow-gpu)"
            return self.allow.gpu(gpu) if isinstance(gpu, int) else f"not a GPU index: {gpu!r}"
        if kind == "sse":
            proxy = str(target.get("proxy"))
            return None if proxy in self.proxies else f"proxy {proxy} is not in this host's allowlist (--allow-proxy)"
        if kind == "docker":
            if "host" in target:
                return "a fault host uses its own Docker daemon: leave out target.host's daemon URL"
            return None if self.docker else "this fault host allows no containers (--allow-docker)"
        return f"unknown kind {kind!r}"

    def declare(self) -> dict[str, Any]:
        """What the master is told this host may touch (it checks a schedule against it first)."""
        a = self.allow
        return {
            "interfaces": sorted(a.interfaces) if self.qdisc else None,
            "netns": sorted(a.netns),
            "gpus": sorted(a.gpus),
            "sims": sorted(self.sims),
            "proxies": sorted(self.proxies),
            "containers": sorted(a.container_labels) if self.docker else None,
            "host_network": a.host_network,
        }


def add_arguments(p: argparse.ArgumentParser) -> None:
    allow.add_arguments(p)
    p.add_argument("--allow-sim", action="append", default=[], metavar="URL", help="a local reference server")
    p.add_argument("--allow-proxy", action="append", default=[], metavar="HOST:PORT", help="a local SSE proxy")
    p.add_argument("--allow-docker", action="store_true", help="containers with an allowed label (--allow-label)")


def from_args(ns: argparse.Namespace) -> Reach:
    for url in ns.allow_sim:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"expected the server's http(s) URL, got {url!r}", field="--allow-sim")
    reach = Reach(
        allow.from_args(ns),
        bool(ns.allow_interface or ns.allow_netns),
        frozenset(u.rstrip("/") for u in ns.allow_sim),
        frozenset(ns.allow_proxy),
        bool(ns.allow_docker),
    )
    if not (reach.qdisc or reach.sims or reach.proxies or reach.docker or reach.allow.gpus):
        raise UsageError("a fault host allowed nothing can do nothing: give one --allow-* option", field="--allow-*")
    return reach
