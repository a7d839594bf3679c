"""What an operator lets the fault runner touch on this host: interfaces, network namespaces,
GPUs and containers. A schedule names targets; only these may be hit (reverting is always allowed)."""

from __future__ import annotations

import argparse
from collections.abc import Collection
from dataclasses import dataclass

CONTAINER_LABEL = "llmchaos.allow=true"  # a container opts in with this label unless others are allowed


@dataclass(frozen=True)
class Allowlist:
    interfaces: frozenset[str] = frozenset()  # empty: any interface but the default-route one
    netns: frozenset[str] = frozenset()  # empty: any named namespace
    gpus: frozenset[int] = frozenset()  # empty: any GPU index
    container_labels: frozenset[str] = frozenset({CONTAINER_LABEL})  # `key=value` or `key`
    host_network: bool = False  # let a fault hit the interface that carries the host's default route

    def interface(
        self, netns: str | None, interface: str, default_route: set[str], altnames: Collection[str] = ()
    ) -> str | None:
        """Why this interface may not be touched, or None. `netns` None is the host's namespace (the
        runner's own), whose `default_route` interfaces need host_network; `interface` is the
        interface's own name, matched together with its `altnames`."""
        if self.netns and (netns is None or netns not in self.netns):
            where = f"network namespace {netns!r}" if netns is not None else "the host's network namespace"
            return f"{where} is not in the allowlist (--allow-netns)"
        names = {interface, *altnames}
        if self.interfaces and not names & self.interfaces:
            return f"interface {interface!r} is not in the allowlist (--allow-interface)"
        if names & default_route and not self.host_network:
            return f"{interface} (host) carries the host's default route; refused without --allow-host-network"
        return None

    def gpu(self, index: int) -> str | None:
        if self.gpus and index not in self.gpus:
            return f"GPU {index} is not in the allowlist (--allow-gpu)"
        return None

    def container(self, name: str | None, labels: dict[str, str]) -> str | None:
        for allowed in self.container_labels:
            key, eq, value = allowed.partition("=")
            if key in labels and (not eq or labels[key] == value):
                return None
        wanted = " or ".join(sorted(self.container_labels))
        return f"container {name} has no allowed label ({wanted}; --allow-label)"


def add_arguments(group: argparse._ActionsContainer) -> None:
    """The allowlist's options, for `llmchaos faults` and for Locust's `--schedule`."""
    group.add_argument(
        "--allow-interface",
        action="append",
        default=[],
        metavar="NAME",
        help="only these interfaces may get a qdisc (repeat; default: any)",
    )
    group.add_argument(
        "--allow-netns",
        action="append",
        default=[],
        metavar="NAME",
        help="only interfaces in these network namespaces (repeat; default: any)",
    )
    group.add_argument(
        "--allow-gpu",
        action="append",
        default=[],
        type=int,
        metavar="INDEX",
        help="only these GPUs may have their clocks locked (repeat; default: any)",
    )
    group.add_argument(
        "--allow-label",
        action="append",
        default=[],
        metavar="KEY[=VALUE]",
        help=f"containers carrying this label may be hit (repeat; default: {CONTAINER_LABEL})",
    )
    group.add_argument(
        "--allow-host-network",
        action="store_true",
        default=False,
        help="allow a qdisc on the interface that carries the host's default route",
    )


def from_args(ns: argparse.Namespace) -> Allowlist:
    return Allowlist(
        frozenset(ns.allow_interface),
        frozenset(ns.allow_netns),
        frozenset(ns.allow_gpu),
        frozenset(ns.allow_label or [CONTAINER_LABEL]),
        bool(ns.allow_host_network),
    )
