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


def test_allow_netns_keeps_faults_off_the_hosts_own_interfaces():
    only_lt = Allowlist(netns=frozenset({"lt"}))
    assert only_lt.interface(None, "veth0", set()) == (
        "the host's network namespace is not in the allowlist (--allow-netns)"
    )
    assert only_lt.interface("lt", "veth0", set()) is None


def test_an_interface_is_known_by_every_name_it_has():
    assert (
        Allowlist().interface(None, "eth0", {"eth0"}, altnames=["uplink"])
        == "eth0 (host) carries the host's default route; refused without --allow-host-network"
    )
    by_altname = Allowlist(interfaces=frozenset({"uplink"}))
    assert by_altname.interface("lt", "veth0", set(), altnames=["uplink"]) is None
    assert by_altname.interface("lt", "veth0", set()) == "interface 'veth0' is not in the allowlist (--allow-interface)"
