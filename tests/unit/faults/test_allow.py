import argparse

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from faults.allow import Allowlist, add_arguments, from_args
from llmchaos.errors import UsageError


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


def options(**given: list) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ns = parser.parse_args([])
    for key, value in given.items():
        setattr(ns, key, value)
    return ns


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"allow_interface": [""]}, "--allow-interface"),
        ({"allow_netns": ["a/b"]}, "--allow-netns"),
        ({"allow_gpu": [-1]}, "--allow-gpu"),
        ({"allow_label": ["=x"]}, "--allow-label"),
        ({"allow_label": ["a b"]}, "--allow-label"),
    ],
)
def test_a_bad_allowlist_entry_is_a_usage_error_naming_its_option(given, field):
    with pytest.raises(UsageError) as e:
        from_args(options(**given))
    assert e.value.field == field


NAMES = st.text(st.characters(codec="utf-8"), max_size=10)
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Z", "C")), min_size=1, max_size=10)  # as validated


@pytest.mark.fuzz
@given(
    st.lists(NAMES, max_size=3),
    st.lists(NAMES, max_size=3),
    st.lists(st.integers(), max_size=3),
    st.lists(NAMES, max_size=3),
    st.booleans(),
    st.none() | WORDS,
    WORDS,
    st.sets(WORDS, max_size=3),
    st.lists(WORDS, max_size=2),
    st.integers(),
    st.dictionaries(NAMES, NAMES, max_size=3),
)
@example(["eth0"], [], [], ["llmchaos.allow=true"], False, None, "eth0", {"eth0"}, ["uplink"], 0, {"": ""})
def test_fuzz_allowlists(
    interfaces, namespaces, gpus, labels, host, netns, iface, default, alts, gpu, container_labels
):
    given = options(
        allow_interface=interfaces, allow_netns=namespaces, allow_gpu=gpus, allow_label=labels, allow_host_network=host
    )
    try:
        allowed = from_args(given)
    except UsageError as e:
        refused = e
    else:
        refused = None
    if refused is not None:
        assert refused.field in ("--allow-interface", "--allow-netns", "--allow-gpu", "--allow-label"), refused
        return
    for answer in (
        allowed.interface(netns, iface, default, alts),
        allowed.gpu(gpu),
        allowed.container(iface, container_labels),
    ):
        assert answer is None or (isinstance(answer, str) and "\n" not in answer)
    if allowed.netns and netns is None:
        assert allowed.interface(netns, iface, default, alts) is not None  # the host is not an allowed namespace
