"""What an operator lets the fault runner touch on this host: interfaces, network namespaces,
GPUs and containers. A schedule names targets; only these may be hit (reverting is always allowed)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from llmchaos.errors import UsageError

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


def _checked(values: list, option: str, ok: Callable[[Any], bool], what: str) -> list:
    for v in values:
        if not ok(v):
            raise UsageError(f"expected {what}, got {v!r}", field=option)
    return values


def is_name(v: object) -> bool:
    """Whether `v` can name an interface, a network namespace or a label key: one printable word
    without '/' (an interface's altname may be up to 127 characters)."""
    return isinstance(v, str) and 0 < len(v) < 128 and v.isprintable() and v.split() == [v] and "/" not in v


def from_args(ns: argparse.Namespace) -> Allowlist:
    """The allowlist the options give (UsageError naming the option for an entry that cannot match)."""
    _checked(ns.allow_interface, "--allow-interface", is_name, "an interface name")
    _checked(ns.allow_netns, "--allow-netns", is_name, "a network namespace's name")
    _checked(ns.allow_gpu, "--allow-gpu", lambda v: v >= 0, "a GPU index")
    _checked(ns.allow_label, "--allow-label", lambda v: is_name(v.partition("=")[0]), "KEY or KEY=VALUE")
    return Allowlist(
        frozenset(ns.allow_interface),
        frozenset(ns.allow_netns),
        frozenset(ns.allow_gpu),
        frozenset(ns.allow_label or [CONTAINER_LABEL]),
        bool(ns.allow_host_network),
    )
