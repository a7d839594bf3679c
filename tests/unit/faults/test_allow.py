from faults.allow import Allowlist


def test_allowlist():
    default = Allowlist()
    assert (
        default.interface(None, "eth0", {"eth0"})
        == "eth0 (host) carries the host's default route; refused without --allow-host-network"
    )
    assert Allowlist(host_network=True).interface(None, "eth0", {"eth0"}) is None
    assert default.interface("lt-client", "eth0", set()) is None  # a namespace has no host default route
    assert (
        Allowlist(netns=frozenset({"lt"})).interface("other", "veth0", set())
        == "network namespace 'other' is not in the allowlist (--allow-netns)"
    )
    assert (
        Allowlist(interfaces=frozenset({"veth0"})).interface(None, "veth1", set())
        == "interface 'veth1' is not in the allowlist (--allow-interface)"
    )
    assert Allowlist(gpus=frozenset({1})).gpu(0) == "GPU 0 is not in the allowlist (--allow-gpu)"
    assert default.gpu(3) is None
    assert default.container("db", {"llmchaos.allow": "true"}) is None
    assert (
        default.container("db", {"llmchaos.allow": "false"})
        == "container db has no allowed label (llmchaos.allow=true; --allow-label)"
    )
    assert Allowlist(container_labels=frozenset({"tier"})).container("db", {"tier": "x"}) is None
