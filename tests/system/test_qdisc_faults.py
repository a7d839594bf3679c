"""tbf and netem on a veth pair between two network namespaces this test creates (root needed)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from pyroute2 import NetNS

from faults.allow import Allowlist
from faults.injectors import steer
from faults.injectors.base import InjectError
from faults.injectors.netem import Netem
from faults.injectors.tbf import Tbf
from tests.noise import WakeNoise
from tests.procs import ROOT, wait_for
from tests.system.netns import in_netns, veth_pair

SINK = """
import socket, sys
s = socket.create_server((sys.argv[1], 5001)); print("ready", flush=True)
while True:
    c, _ = s.accept(); n = 0
    while (b := c.recv(65536)): n += len(b)
    c.sendall(str(n).encode()); c.close()
"""
SEND = """
import socket, sys, time
t = time.perf_counter(); c = socket.create_connection((sys.argv[1], 5001)); c.sendall(b"x" * int(sys.argv[2]))
c.shutdown(socket.SHUT_WR); assert int(c.recv(64)) == int(sys.argv[2]); print(time.perf_counter() - t)
"""
BYTES = 600_000


def throughput_mbit(ns: str, addr: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", SEND, addr, str(BYTES)],
        preexec_fn=in_netns(ns),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return BYTES * 8 / float(out.stdout) / 1e6


@pytest.fixture
def pair():
    with veth_pair() as (a, b, addr_a, _addr_b):
        sink = subprocess.Popen(
            [sys.executable, "-c", SINK, addr_a], preexec_fn=in_netns(a), stdout=subprocess.PIPE, text=True
        )
        try:
            assert sink.stdout.readline().strip() == "ready"
            yield a, b, addr_a
        finally:
            sink.kill()
            sink.wait()


def test_tbf_limits_throughput_as_set_and_reverts(pair):
    _a, b, addr_a = pair
    tbf = Tbf({"netns": b, "interface": "veth0"})
    free = throughput_mbit(b, addr_a)
    tbf.apply("slow-link", {"rate": "8mbit", "burst": 16384}, {})
    try:
        assert tbf.read_back()["kind"] == "tbf"
        limited = throughput_mbit(b, addr_a)
    finally:
        tbf.revert({})
    assert 6.0 < limited < 10.0, limited  # the set rate, within the bucket's burst
    assert free > 5 * limited
    assert tbf.read_back()["kind"] != "tbf"
    tbf.revert({})  # already gone: still a success
    assert throughput_mbit(b, addr_a) > 5 * limited


@pytest.mark.parametrize(
    ("params", "bytes_per_s"),
    [
        ({"rate": "1.5mbit", "latency": "0.5ms"}, 187_500),  # pyroute2 reads whole numbers only
        ({"rate": "100kbit"}, 12_500),  # the default burst of 32 KiB: 2.6 s of sending
        ({"rate": "300bit", "burst": 1514, "latency": "10s"}, 37),
        ({"rate": "34gbit", "burst": 2**26, "latency": "10ms"}, 4_250_000_000),
    ],
    ids=["decimal rate", "slow rate", "slowest", "fastest"],
)
def test_what_the_check_lets_through_the_kernel_takes(pair, params, bytes_per_s):
    _a, b, _addr_a = pair
    target = {"netns": b, "interface": "veth0"}
    Tbf.check(target, params)
    tbf = Tbf(target)
    tbf.apply("edge", params, {})
    try:
        assert root_tbf_rate(b) == bytes_per_s
    finally:
        tbf.revert({})
    assert root_tbf_rate(b) is None


@pytest.mark.timing
def test_netem_delays_where_the_kernel_has_it_and_says_so_where_not(pair):
    _a, b, addr_a = pair
    netem = Netem({"netns": b, "interface": "veth0"})
    refused = None
    try:
        netem.apply("eu-jitter", {"delay": "100ms", "jitter": "30ms", "loss": "0.5%"}, {})
    except InjectError as e:
        refused = str(e)
    if refused is not None:
        assert refused == "this kernel has no sch_netem (try: modprobe sch_netem)"
        assert netem.read_back()["kind"] != "netem"  # nothing half-applied
        return
    try:
        t = time.perf_counter()
        throughput_mbit(b, addr_a)
        assert time.perf_counter() - t > 0.1  # at least one delayed round trip
    finally:
        netem.revert({})
    assert netem.read_back()["kind"] != "netem"


def test_a_root_qdisc_this_run_did_not_add_is_reported_and_left_alone(pair):
    _, b, _ = pair
    with NetNS(b) as ns:  # someone else's shaping (handle 2:), or a leftover the journal lost
        ns.tc("add", "tbf", ns.link_lookup(ifname="veth0")[0], 0x20000, rate="1mbit", burst=16384, latency="50ms")
    tbf = Tbf({"netns": b, "interface": "veth0"})
    assert tbf.probe() == (
        f"veth0 in netns {b} already has a root tbf qdisc that this run did not add "
        f"(a leftover? remove it: tc -n {b} qdisc del dev veth0 root)"
    )
    with pytest.raises(InjectError):
        tbf.apply("slow-link", {"rate": "8mbit"}, {})
    tbf.revert({})  # not ours: untouched
    assert tbf.read_back() == {"kind": "tbf", "handle": 0x20000}


def test_only_allowed_namespaces_and_interfaces(pair):
    _, b, _ = pair
    assert (
        Tbf({"netns": b, "interface": "veth0"}, Allowlist(netns=frozenset({"lt-client"}))).probe()
        == f"network namespace {b!r} is not in the allowlist (--allow-netns)"
    )
    assert Tbf({"netns": b, "interface": "veth0"}, Allowlist(netns=frozenset({b}))).probe() is None
    inward = {"rate": "8mbit", "direction": "ingress", "match": {"dport": 5001}}  # the allowlist holds whatever the aim
    refused = Tbf({"netns": b, "interface": "veth0"}, Allowlist(interfaces=frozenset({"eth9"})))
    assert refused.probe(inward) == "interface 'veth0' is not in the allowlist (--allow-interface)"
    with pytest.raises(InjectError, match="not in the allowlist"):
        refused.apply("slow-in", inward, refused.save(inward))
    assert links_and_qdiscs(b)["links"] == [("lo", None), ("veth0", "veth")]  # no IFB was made


def test_missing_namespace_interface_and_the_default_route_are_refused():
    assert Tbf({"netns": "llmc-none", "interface": "veth0"}).probe() == "tbf: no network namespace 'llmc-none'"
    assert "no interface nope0 (host)" in Tbf({"interface": "nope0"}).probe()
    from faults.injectors.qdisc import default_route_interfaces

    for iface in default_route_interfaces():  # (none in a sandbox without a default route)
        assert "carries the host's default route; refused" in Tbf({"interface": iface}).probe()
        assert "default route" not in (Tbf({"interface": iface}, Allowlist(host_network=True)).probe() or "")


def run_until_applied(path, journal, tbf: Tbf) -> subprocess.Popen:
    """`llmchaos faults run`, once its tbf reads back."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "faults", "run", str(path), "--journal", str(journal)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: tbf.read_back()["kind"] == "tbf", proc, "the tbf never read back")
    return proc


def run_to_end(path, journal) -> subprocess.CompletedProcess:
    """`llmchaos faults run` of `path`, to its end."""
    return subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "run", str(path), "--journal", str(journal)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def killed_once_applied(path, journal, tbf: Tbf) -> None:
    """`llmchaos faults run` SIGKILLed once its tbf reads back: the journal holds it."""
    proc = run_until_applied(path, journal, tbf)
    proc.kill()
    proc.communicate(timeout=10)


def recover(journal) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "recover", "--journal", str(journal)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


@pytest.mark.timing
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_runner_leaves_no_qdisc(pair, tmp_path, sig):
    _, b, _ = pair
    tbf = Tbf({"netns": b, "interface": "veth0"})
    path, journal = tmp_path / "schedule.yaml", tmp_path / "journal.json"
    path.write_text(
        f"faults:\n  - {{name: slow-link, kind: tbf, target: {{netns: {b}, interface: veth0}}, "
        f"at: 0s, duration: 60s, params: {{rate: 8mbit}}}}\n"
    )
    proc = run_until_applied(path, journal, tbf)
    with WakeNoise() as noise:
        sent = time.monotonic()
        proc.send_signal(sig)
        while sig == signal.SIGTERM and tbf.read_back()["kind"] == "tbf":
            time.sleep(0.01)
        took = time.monotonic() - sent
    if sig == signal.SIGTERM:
        assert took < 1.0 + 2 * noise.worst, ("not reverted within 1 s of SIGTERM", took, noise.worst)
    proc.communicate(timeout=10)
    if sig == signal.SIGKILL:
        assert tbf.read_back()["kind"] == "tbf"  # nothing ran to undo it ...
        r = recover(journal)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.startswith("reverted tbf slow-link"), r.stdout + r.stderr
    assert tbf.read_back()["kind"] != "tbf"
    assert json.loads(journal.read_text()) == []


@pytest.mark.parametrize("gone", ["netns", "interface"])
def test_a_leftover_whose_target_is_gone_is_dropped_and_said_so(tmp_path, gone):
    path, journal = tmp_path / "schedule.yaml", tmp_path / "journal.json"
    with veth_pair() as (_, b, _, _):
        path.write_text(
            f"faults:\n  - {{name: slow-link, kind: tbf, target: {{netns: {b}, interface: veth0}}, "
            f"at: 0s, duration: 60s, params: {{rate: 8mbit}}}}\n"
        )
        killed_once_applied(path, journal, Tbf({"netns": b, "interface": "veth0"}))
        if gone == "interface":
            with NetNS(b) as ns:
                ns.link("del", index=ns.link_lookup(ifname="veth0")[0])
            r = recover(journal)
    if gone == "netns":
        r = recover(journal)  # the namespaces are gone now
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("dropped tbf slow-link"), r.stdout
    assert "nothing left to revert" in r.stdout
    assert json.loads(journal.read_text()) == []
    again = recover(journal)
    assert (again.returncode, again.stdout.strip()) == (0, "nothing to recover")


def root_tbf_rate(ns: str) -> int | None:
    """The rate (bytes/s) of the root tbf on veth0 in `ns`, None when its root is not a tbf."""
    with NetNS(ns) as n:
        roots = [q for q in n.get_qdiscs(index=n.link_lookup(ifname="veth0")[0]) if q["parent"] == 0xFFFFFFFF]
        if not roots or roots[0].get_attr("TCA_KIND") != "tbf":
            return None
        return roots[0].get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")["rate"]


def test_a_sweep_leaves_the_operators_own_qdisc_alone(tmp_path):
    path, journal = tmp_path / "schedule.yaml", tmp_path / "journal.json"
    with veth_pair() as (a, b, _, _):
        path.write_text(
            f"faults:\n  - {{name: slow-link, kind: tbf, target: {{netns: {b}, interface: veth0}}, "
            f"at: 0s, duration: 60s, params: {{rate: 8mbit}}}}\n"
        )
        killed_once_applied(path, journal, Tbf({"netns": b, "interface": "veth0"}))
        subprocess.run(["tc", "-n", b, "qdisc", "del", "dev", "veth0", "root"], check=True)
        operators = ["tbf", "rate", "1mbit", "burst", "16384", "latency", "50ms"]  # with the handle we used to use
        subprocess.run(["tc", "-n", b, "qdisc", "add", "dev", "veth0", "root", "handle", "1:", *operators], check=True)
        other = tmp_path / "other.yaml"  # an unrelated run, which sweeps first
        other.write_text(
            f"faults:\n  - {{name: other-link, kind: tbf, target: {{netns: {a}, interface: veth0}}, "
            f"at: 0s, duration: 100ms, params: {{rate: 8mbit}}}}\n"
        )
        r = run_to_end(other, journal)
        assert r.returncode == 0, r.stderr
        assert root_tbf_rate(b) == 125_000  # 1mbit: still the operator's (it was deleted)
        assert json.loads(journal.read_text()) == []  # nothing of ours is left there to revert


def probe_from(ns: str, tmp_path, target: str, *flags: str) -> subprocess.CompletedProcess:
    """`llmchaos faults probe` of a tbf on `target`, run from inside `ns` (its own namespace is its host)."""
    path = tmp_path / "probe.yaml"
    path.write_text(
        f"faults:\n  - {{name: slow, kind: tbf, target: {target}, at: 0s, duration: 1s, params: {{rate: 8mbit}}}}\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "probe", str(path), *flags],
        cwd=ROOT,
        preexec_fn=in_netns(ns),
        capture_output=True,
        text=True,
    )


def test_the_default_route_interface_is_refused_by_any_name_it_goes_by(tmp_path):
    with veth_pair() as (_, b, addr_a, _):
        with NetNS(b) as n:
            n.route("add", dst="default", gateway=addr_a)  # b's default route leaves through its veth0
        subprocess.run(["ip", "-n", b, "link", "property", "add", "dev", "veth0", "altname", "uplink"], check=True)
        for target in (
            "{interface: uplink}",
            f"{{netns: {b}, interface: veth0}}",
            f"{{netns: {b}, interface: uplink}}",
        ):
            r = probe_from(b, tmp_path, target)
            assert r.returncode == 1, (target, r.stdout, r.stderr)
            assert "NO: veth0 (host) carries the host's default route" in r.stdout, target
        allowed = probe_from(b, tmp_path, "{interface: uplink}", "--allow-host-network")
        assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_allow_netns_keeps_a_tbf_off_the_hosts_interfaces(tmp_path):
    with veth_pair() as (a, b, _, _):
        r = probe_from(b, tmp_path, "{interface: veth0}", "--allow-netns", a)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "NO: the host's network namespace is not in the allowlist (--allow-netns)" in r.stdout
        assert probe_from(b, tmp_path, f"{{netns: {a}, interface: veth0}}", "--allow-netns", a).returncode == 0


def links_and_qdiscs(ns: str) -> dict:
    """The namespace's interfaces (name, kind) and qdiscs (interface, kind, parent), as read back."""
    with NetNS(ns) as n:
        links = {
            x["index"]: (x.get_attr("IFLA_IFNAME"), x.get_nested("IFLA_LINKINFO", "IFLA_INFO_KIND"))
            for x in n.get_links()
        }
        qdiscs = sorted((links[q["index"]][0], q.get_attr("TCA_KIND"), q["parent"]) for q in n.get_qdiscs())
    return {"links": sorted(links.values(), key=str), "qdiscs": qdiscs}


@pytest.mark.timing  # measures a rate (beside a busy test run: 5.7 Mbit/s through an 8 Mbit/s bucket)
def test_tbf_on_ingress_limits_what_arrives_through_an_ifb_and_leaves_nothing():
    """This host's kernel has ifb, sch_ingress, cls_u32 and act_mirred: ingress shaping runs here too."""
    if steer.lacks("ingress"):
        pytest.skip(steer.lacks("ingress"))
    with veth_pair() as (a, b, _, addr_b):
        sink = subprocess.Popen(
            [sys.executable, "-c", SINK, addr_b], preexec_fn=in_netns(b), stdout=subprocess.PIPE, text=True
        )
        try:
            assert sink.stdout.readline().strip() == "ready"
            tbf = Tbf({"netns": b, "interface": "veth0"})
            params = {"rate": "8mbit", "burst": 16384, "direction": "ingress"}
            before, free = links_and_qdiscs(b), throughput_mbit(a, addr_b)
            saved = tbf.save(params)
            saved.update(tbf.apply("slow-in", params, saved))
            try:
                during = links_and_qdiscs(b)
                # the best of three transfers: a shaper caps every one, a busy machine slows any one (5.3 and
                # 5.44 Mbit/s seen under a whole make test, against 7.5 quiet)
                limited = max(throughput_mbit(a, addr_b) for _ in range(3))
            finally:
                tbf.revert(saved)
            assert [kind for _, kind in during["links"]].count("ifb") == 1
            assert ("veth0", "ingress", 0xFFFFFFF1) in during["qdiscs"]
            assert limited < 10.0, limited  # the cap: what the shaper guarantees, however busy the machine
            assert limited > 4.0, limited  # and it lets its rate through (a wrong rate unit reads 0.008 or 8000)
            assert free > 5 * limited
            assert links_and_qdiscs(b) == before
        finally:
            sink.kill()
            sink.wait()


def test_a_match_where_the_kernel_lacks_sch_prio_is_refused_and_works_where_it_has_it(pair, tmp_path):
    _, b, _ = pair
    path = tmp_path / "match.yaml"
    path.write_text(
        f"faults:\n  - {{name: slow, kind: tbf, target: {{netns: {b}, interface: veth0}}, at: 0s, duration: 100ms,\n"
        f"     params: {{rate: 8mbit}}, match: {{dport: 5001}}}}\n"
    )
    r = run_to_end(path, tmp_path / "j.json")
    reason = steer.lacks("match")
    if reason is not None:
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == f"llmchaos: error: {path}:3: faults[0].match: {reason}"
        assert "this kernel has no sch_prio (try: modprobe sch_prio)" in reason
    else:
        assert r.returncode == 0, r.stderr
    assert Tbf({"netns": b, "interface": "veth0"}).read_back()["kind"] not in ("tbf", "prio")


def test_a_schedule_for_a_qdisc_this_kernel_lacks_is_refused_before_the_run(pair, tmp_path):
    _, b, _ = pair
    path = tmp_path / "jitter.yaml"
    path.write_text(
        f"faults:\n  - {{name: jitter, kind: netem, target: {{netns: {b}, interface: veth0}}, at: 0s,\n"
        f"     duration: 100ms, params: {{delay: 100ms, jitter: 30ms}}}}\n"
    )
    journal = tmp_path / "journal.json"
    r = run_to_end(path, journal)
    if Netem.probe_host() is None:
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        f"llmchaos: error: {path}:2: faults[0].target: cannot inject netem: this kernel has no sch_netem "
        "(try: modprobe sch_netem)"
    )
    assert not journal.exists() or json.loads(journal.read_text()) == []
