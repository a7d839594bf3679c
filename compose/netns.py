"""A network namespace joined to the host by a veth pair, for workers that reach the stack over a real
link (and a qdisc fault on it): created and removed by whoever asked for it (root only)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pyroute2 import IPRoute, NetNS, netns

NET = "198.18.{}.{}"  # RFC 2544's benchmarking range: only on links made here


@dataclass(frozen=True)
class Link:
    namespace: str
    host_interface: str  # the host's end
    host_address: str
    address: str  # the namespace's end, `veth0`


@contextlib.contextmanager
def namespace_with_link(prefix: str = "llmc-w") -> Iterator[Link]:
    """A fresh namespace whose `veth0` is joined to a host interface; both removed at the end."""
    tag = uuid.uuid4().hex[:6]
    ns, host_if, subnet = f"{prefix}-{tag}", f"llmcw{tag}", int(tag[:2], 16) % 200
    link = Link(ns, host_if, NET.format(subnet, 1), NET.format(subnet, 2))
    netns.create(ns)
    try:
        with IPRoute() as ip:
            ip.link("add", ifname=host_if, kind="veth", peer={"ifname": "veth0", "net_ns_fd": ns})
            idx = ip.link_lookup(ifname=host_if)[0]
            ip.addr("add", index=idx, address=link.host_address, prefixlen=24)
            ip.link("set", index=idx, state="up")
        with NetNS(ns) as n:
            idx = n.link_lookup(ifname="veth0")[0]
            n.addr("add", index=idx, address=link.address, prefixlen=24)
            n.link("set", index=idx, state="up")
            n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
        yield link
    finally:
        with IPRoute() as ip:
            for idx in ip.link_lookup(ifname=host_if):  # gone with the namespace already, as a rule
                ip.link("del", index=idx)
        netns.remove(ns)


def enter(name: str) -> Callable[[], None]:
    """A preexec_fn that runs the child in namespace `name`."""

    def run() -> None:
        netns.setns(name)

    return run
