"""Three network namespaces as three machines, joined by veth pairs (root; names unique per run):

    master (M) ---- client (C) ---- GPU host (G)        the data path: M -> C -> G
         \\________________________________/             the control link: M <-> G only

The GPU host holds the server's address on its loopback (`service`); the master's and the client's
namespaces reach it through the client, which forwards, so every answer to the load leaves G by
`g2c` (a qdisc there shapes all of it), while the fault host in G reaches the master over `g2m`
alone (cutting it cuts the fault host off, not the load).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from pyroute2 import NetNS, netns

from tests.system.netns import in_netns

NET = "198.18.{}.{}"  # RFC 2544's benchmarking range: only inside namespaces these tests create


@dataclass(frozen=True)
class Lab:
    master: str  # namespace names
    gpu: str
    client: str
    master_for_gpu: str  # M's address on the control link (the fault host joins it)
    master_for_client: str  # M's address towards C (the client's worker joins it)
    service: str  # the server's address, on G's loopback
    to_client: str = "g2c"  # G's interface on the data path
    to_master: str = "g2m"  # G's interface on the control link

    def link(self, up: bool) -> None:
        """Set G's end of the control link up or down (the master then cannot reach the fault host)."""
        with NetNS(self.gpu) as n:
            n.link("set", index=n.link_lookup(ifname=self.to_master)[0], state="up" if up else "down")


def _pair(a: str, b: str, if_a: str, if_b: str, subnet: int) -> tuple[str, str]:
    """A veth pair between namespaces a and b, addressed .1 (a) and .2 (b) in `subnet`."""
    with NetNS(a) as na:
        na.link("add", ifname=if_a, kind="veth", peer={"ifname": if_b, "net_ns_fd": b})
    for ns, ifname, host in ((a, if_a, 1), (b, if_b, 2)):
        with NetNS(ns) as n:
            idx = n.link_lookup(ifname=ifname)[0]
            n.addr("add", index=idx, address=NET.format(subnet, host), prefixlen=24)
            n.link("set", index=idx, state="up")
    return NET.format(subnet, 1), NET.format(subnet, 2)


@contextlib.contextmanager
def three_hosts() -> Iterator[Lab]:
    tag = uuid.uuid4().hex[:6]
    m, g, c = f"llmc-m-{tag}", f"llmc-g-{tag}", f"llmc-c-{tag}"
    base = 3 * (int(tag[:2], 16) % 80)  # three subnets of this run's own
    made = []
    try:
        for ns in (m, g, c):
            netns.create(ns)
            made.append(ns)
            with NetNS(ns) as n:
                n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
        m_c, c_m = _pair(m, c, "m2c", "c2m", base)
        m_g, _ = _pair(m, g, "m2g", "g2m", base + 1)
        c_g, g_c = _pair(c, g, "c2g", "g2c", base + 2)
        service = f"198.19.{base}.1"
        with NetNS(g) as n:
            n.addr("add", index=n.link_lookup(ifname="lo")[0], address=service, prefixlen=32)
            n.route("add", dst=NET.format(base, 0), dst_len=24, gateway=c_g)  # answers to M go back by C
        with NetNS(m) as n:
            n.route("add", dst=service, dst_len=32, gateway=c_m)
        with NetNS(c) as n:
            n.route("add", dst=service, dst_len=32, gateway=g_c)
        forward = "open('/proc/sys/net/ipv4/ip_forward', 'w').write('1')"
        subprocess.run([sys.executable, "-c", forward], preexec_fn=in_netns(c), check=True)
        yield Lab(m, g, c, m_g, m_c, service)
    finally:
        for ns in made:
            with contextlib.suppress(OSError):
                netns.remove(ns)
