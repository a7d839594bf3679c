"""`llmchaos stack up --worker-host`: workers in a network namespace of their own (this test creates
it, joined to the host by a veth pair) join a stack's master over that link and run its load; `down`
on each side leaves no process and no port, and the namespace and the link go with the test."""

from __future__ import annotations

import re
import time

import httpx
from pyroute2 import IPRoute, netns

from compose.netns import enter, namespace_with_link
from tests.integration.test_stack import assert_all_gone, services, short_run, stack


def test_workers_in_their_own_namespace_join_the_master_over_the_network(tmp_path):
    """Two workers started in a namespace of their own join the master over the veth link and run its load.

    Long (about 30 s here): two `stack up`s (the master's side, then the workers' in the namespace), each waiting
    for its processes to answer, a short run until Prometheus scrapes ok requests, and two `stack down`s."""
    home, away = tmp_path / "stack", tmp_path / "workers"
    with namespace_with_link() as link:
        ns, host_addr = link.namespace, link.host_address
        up = stack("up", "--state-dir", str(home), "--bind", host_addr, "--workers", "0", "--langs", "en")
        started = services(home) if (home / "state.json").exists() else {}
        joined: dict[str, dict] = {}
        try:
            assert up.returncode == 0, up.stdout + up.stderr
            (join,) = re.findall(r"--worker-host (\S+)", up.stdout)
            assert join.startswith(host_addr + ":")
            w = stack("up", "--state-dir", str(away), "--worker-host", join, "--workers", "2", preexec_fn=enter(ns))
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
