"""`llmchaos stack up --worker-host`: workers in a network namespace of their own (this test creates
it, joined to the host by a veth pair) join a stack's master over that link and run its load; `down`
on each side leaves no process and no port, and the namespace and the link go with the test."""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Iterator

import httpx
from pyroute2 import IPRoute, NetNS, netns

from tests.integration.test_stack import assert_all_gone, services, short_run, stack
from tests.system.netns import NET, in_netns


@contextlib.contextmanager
def namespace_with_link() -> Iterator[tuple[str, str, str]]:
    """A namespace joined to the host by a veth pair: (namespace, the host's address, its address)."""
    tag = uuid.uuid4().hex[:6]
    ns, host_if, subnet = f"llmc-w-{tag}", f"llmcw{tag}", int(tag[:2], 16) % 200
    host_addr, ns_addr = NET.format(subnet, 1), NET.format(subnet, 2)
    netns.create(ns)
    try:
        with IPRoute() as ip:
            ip.link("add", ifname=host_if, kind="veth", peer={"ifname": "veth0", "net_ns_fd": ns})
            idx = ip.link_lookup(ifname=host_if)[0]
            ip.addr("add", index=idx, address=host_addr, prefixlen=24)
            ip.link("set", index=idx, state="up")
        with NetNS(ns) as n:
            idx = n.link_lookup(ifname="veth0")[0]
            n.addr("add", index=idx, address=ns_addr, prefixlen=24)
            n.link("set", index=idx, state="up")
            n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
        yield ns, host_addr, ns_addr
    finally:
        with IPRoute() as ip, contextlib.suppress(Exception):  # gone with the namespace already
            ip.link("del", index=ip.link_lookup(ifname=host_if)[0])
        netns.remove(ns)


def test_workers_in_their_own_namespace_join_the_master_over_the_network(tmp_path):
    home, away = tmp_path / "stack", tmp_path / "workers"
    with namespace_with_link() as (ns, host_addr, _ns_addr):
        up = stack("up", "--state-dir", str(home), "--bind", host_addr, "--workers", "0", "--langs", "en")
        started = services(home) if (home / "state.json").exists() else {}
        joined: dict[str, dict] = {}
        try:
            assert up.returncode == 0, up.stdout + up.stderr
            (join,) = re.findall(r"--worker-host (\S+)", up.stdout)
            assert join.startswith(host_addr + ":")
            w = stack("up", "--state-dir", str(away), "--worker-host", join, "--workers", "2", preexec_fn=in_netns(ns))
            joined = services(away) if (away / "state.json").exists() else {}
            assert w.returncode == 0, w.stdout + w.stderr
            master = started["locust-master"]["url"]
            deadline = time.monotonic() + 30
            while httpx.get(master + "/stats/requests", timeout=5).json()["worker_count"] < 2:
                assert time.monotonic() < deadline, "the namespace's workers never joined"
                time.sleep(0.2)
            assert short_run(master, started["prometheus"]["url"]) > 0
            workers = httpx.get(master + "/stats/requests", timeout=5).json()["workers"]
            assert len(workers) == 2
        finally:
            stack("down", "--state-dir", str(away))
            stack("down", "--state-dir", str(home))
        assert_all_gone({**started, **joined})
    assert ns not in netns.listnetns()
    with IPRoute() as ip:
        assert not [link for link in ip.get_links() if link.get_attr("IFLA_IFNAME", "").endswith(ns[-6:])]
