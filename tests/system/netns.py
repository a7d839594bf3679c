"""Network namespaces and veth pairs a test creates for itself and removes at the end."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

from pyroute2 import NetNS, netns

NET = "198.18.{}.{}"  # RFC 2544's benchmarking range: only inside namespaces these tests create


@contextlib.contextmanager
def veth_pair() -> Iterator[tuple[str, str, str, str]]:
    """Two namespaces joined by a veth pair: (ns_a, ns_b, addr_a, addr_b); interface `veth0` in each."""
    tag = uuid.uuid4().hex[:6]
    a, b = f"llmc-a-{tag}", f"llmc-b-{tag}"
    netns.create(a)
    netns.create(b)
    try:
        with NetNS(a) as na:
            na.link("add", ifname="veth0", kind="veth", peer={"ifname": "veth1", "net_ns_fd": b})
        subnet = int(tag[:2], 16) % 200
        for ns, host in ((a, 1), (b, 2)):
            with NetNS(ns) as n:
                if ns == b:
                    n.link("set", index=n.link_lookup(ifname="veth1")[0], ifname="veth0")
                idx = n.link_lookup(ifname="veth0")[0]
                n.addr("add", index=idx, address=NET.format(subnet, host), prefixlen=24)
                n.link("set", index=idx, state="up")
                n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
        yield a, b, NET.format(subnet, 1), NET.format(subnet, 2)
    finally:
        for ns in (a, b):
            with contextlib.suppress(OSError):
                netns.remove(ns)


def in_netns(name: str):  # a preexec_fn for subprocess
    def enter() -> None:
        netns.setns(name)
        os.environ["LLMCHAOS_NETNS"] = name

    return enter
