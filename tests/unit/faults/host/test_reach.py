"""A fault host touches only what its own options allow; a kind nothing allowed is refused."""

import argparse

import pytest

from faults.host import reach
from llmchaos.errors import UsageError


def parse(*argv: str) -> reach.Reach:
    p = argparse.ArgumentParser()
    reach.add_arguments(p)
    return reach.from_args(p.parse_args(argv))


def test_deny_by_default_and_only_what_is_named():
    r = parse("--allow-sim", "http://127.0.0.1:8000/", "--allow-gpu", "1")
    assert r.refusal("gpu_clock", {"sim": "http://127.0.0.1:8000"}) is None
    assert "not in this host's allowlist (--allow-sim)" in r.refusal("gpu_clock", {"sim": "http://10.0.0.9:8000"})
    assert r.refusal("gpu_clock", {"gpu": 1}) is None
    assert r.refusal("gpu_clock", {"gpu": 0}) == "GPU 0 is not in the allowlist (--allow-gpu)"
    assert "allows no interface" in r.refusal("tbf", {"interface": "eth1"})
    assert "allows no containers" in r.refusal("docker", {"container": "llm"})
    assert "proxy 127.0.0.1:9100 is not in this host's allowlist" in r.refusal("sse", {"proxy": "127.0.0.1:9100"})
    assert r.declare()["sims"] == ["http://127.0.0.1:8000"]
    assert r.declare()["interfaces"] is None


def test_interfaces_proxies_and_containers_once_allowed():
    r = parse("--allow-interface", "eth1", "--allow-proxy", "127.0.0.1:9100", "--allow-docker")
    assert r.refusal("netem", {"interface": "eth1"}) is None  # the injector's own allowlist checks the name
    assert r.refusal("sse", {"proxy": "127.0.0.1:9100"}) is None
    assert r.refusal("docker", {"container": "llm"}) is None
    assert "its own Docker daemon" in r.refusal("docker", {"container": "llm", "host": "tcp://10.0.0.9:2375"})
    assert r.refusal("gpu_clock", {"gpu": 0}) == "this fault host allows no GPU (--allow-gpu)"


def test_a_host_allowed_nothing_does_not_start():
    with pytest.raises(UsageError, match="a fault host allowed nothing can do nothing"):
        parse()
    with pytest.raises(UsageError, match="--allow-sim: expected the server's http"):
        parse("--allow-sim", "127.0.0.1:8000")
