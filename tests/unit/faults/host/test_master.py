"""The master's end of its fault hosts, over a fake transport that records what it sends: which hello
it believes for a host's name (a new run of it, never an earlier run's replayed, never a second run
while the one it follows is alive: issue 34, defect 4), what it leases, and which acknowledgement it
takes into its ledger (issue 36)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from faults.host import messages as m
from faults.host.ledger import LOST_S, Ledger
from faults.host.master import FaultHosts
from faults.host.seal import seal, unseal
from faults.injectors import KINDS
from faults.schedule import load
from faults.timeline import Segment

SECRET = b"s" * 24
SCHEDULE = """faults:
  - {name: slow, kind: gpu_clock, target: {host: gpu-1, sim: "http://127.0.0.1:9"}, at: 1s, duration: 1s,
     params: {graphics_mhz: 660}}
"""
BOOT = "a" * 16
NODE = f"llmchaos-fault-host.gpu-1.{BOOT}"


@dataclass
class Message:
    data: object
    node_id: str


@dataclass
class Transport:
    """Records every message the master's end sends (opened with the secret, as its host would)."""

    master_bind_host: str = "127.0.0.1"
    master_bind_port: int = 5557
    sent: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def register_message(self, kind: str, handler: object) -> None:
        pass

    def send_message(self, kind: str, data: dict[str, Any], client_id: str) -> None:
        self.sent.append((kind, client_id, unseal(SECRET, kind, client_id, data)))

    def leases(self) -> list[m.Lease]:
        return [m.parse(m.Lease, body) for kind, _, body in self.sent if kind == m.LEASE]


@dataclass
class Published:
    calls: list[tuple[list[Segment], bool]] = field(default_factory=list)

    def __call__(self, segments: list[Segment], final: bool) -> None:
        self.calls.append((segments, final))


@pytest.fixture
def hosts(tmp_path) -> FaultHosts:
    path = tmp_path / "schedule.yaml"
    path.write_text(SCHEDULE)
    schedule = load(str(path), KINDS)
    ledger = Ledger(schedule, 60.0, lease_s=3.0, hold_s=3.0)
    specs = [f for f in schedule.faults if f.host]
    return FaultHosts(Transport(), str(path), specs, ledger, SECRET, Published())  # type: ignore[arg-type]


def hello(hosts: FaultHosts, boot: str, started: float) -> None:
    node = f"llmchaos-fault-host.gpu-1.{boot}"
    body = m.body(m.Hello("gpu-1", boot, {}, 1.0, started))
    hosts._hello(Message(seal(SECRET, m.HELLO, node, body), node))  # type: ignore[arg-type]


def ack(hosts: FaultHosts, lease: m.Lease, spans: list[list[float | None]], session: str | None = None) -> None:
    """Host gpu-1's answer to `lease`: it holds window slow#0 over `spans` (its clock, the master's here)."""
    now = time.time()
    records = [m.Record("slow#0", "slow", spans)] if spans else []
    answer = m.Ack(BOOT, session or lease.session, lease.seq, lease.sent, now, now, records)
    hosts._ack(Message(seal(SECRET, m.ACK, NODE, m.body(answer)), NODE))  # type: ignore[arg-type]


def started(hosts: FaultHosts, ago: float) -> float:
    """Start the test `ago` s before now (its window slow from 1 s to 2 s); the loop is not run here."""
    hello(hosts, BOOT, 100.0)
    t0 = time.time() - ago
    hosts.start(t0)
    assert hosts._loop is not None
    hosts._loop.kill(block=False)  # the test drives the leases itself
    return t0


def test_a_new_run_is_followed_and_an_earlier_one_never_again(hosts, caplog):
    h = hosts.ledger.hosts["gpu-1"]
    hello(hosts, "a" * 16, 100.0)
    assert h.boot == "a" * 16
    hello(hosts, "b" * 16, 200.0)  # while run a is alive: two hosts under one name
    assert (h.boot, h.rival) == ("a" * 16, "b" * 16)
    assert "fault host gpu-1 is already run aaaaaaaaaaaaaaaa, alive; give each host its own --name" in caplog.text
    h.heard = time.time() - LOST_S - 1  # run a went silent: a new run may take its place
    hello(hosts, "b" * 16, 200.0)
    assert (h.boot, h.rival, h.past) == ("b" * 16, None, {"a" * 16})
    h.heard = time.time() - LOST_S - 1
    hello(hosts, "a" * 16, 100.0)  # run a's hello, captured and replayed
    hello(hosts, "c" * 16, 150.0)  # a run never seen, but begun before the one followed
    assert h.boot == "b" * 16
    assert caplog.text.count("an earlier run of fault host gpu-1 (a replay?)") == 2


def test_a_due_window_is_leased_to_its_host_and_its_ack_is_what_labels_it(hosts):
    t0 = started(hosts, ago=1.5)  # slow is due now
    hosts._lease()
    (lease,) = hosts.runner.leases()  # type: ignore[attr-defined]
    assert (lease.to, lease.session) == (BOOT, hosts.id)
    (window,) = lease.windows
    assert (window.id, window.name, window.params) == ("slow#0", "slow", {"graphics_mhz": 660})
    assert hosts.ledger.provisional(time.time()) == ()  # due is not applied: nothing acknowledged yet
    ack(hosts, lease, [[t0 + 1.01, None]])
    assert hosts.ledger.provisional(time.time()) == ("slow",)
    assert hosts.ledger.hosts["gpu-1"].known == lease.sent


def test_an_ack_of_another_session_or_an_unknown_lease_is_not_taken(hosts):
    t0 = started(hosts, ago=1.5)
    hosts._lease()
    (lease,) = hosts.runner.leases()  # type: ignore[attr-defined]
    known = hosts.ledger.hosts["gpu-1"].known
    ack(hosts, lease, [[t0 + 1.0, None]], session="b" * 32)  # an earlier master's session
    ack(hosts, m.Lease(BOOT, hosts.id, lease.seq + 5, lease.sent, []), [[t0 + 1.0, None]])  # a lease never sent
    assert hosts.ledger.provisional(time.time()) == ()
    assert hosts.ledger.hosts["gpu-1"].known == known
    ack(hosts, lease, [[t0 + 1.0, None]])
    ack(hosts, lease, [])  # the same lease answered twice: the second is not news
    assert hosts.ledger.provisional(time.time()) == ("slow",)


def test_at_stop_nothing_is_leased_and_the_phases_are_decided_to_the_end(hosts):
    t0 = started(hosts, ago=1.5)
    hosts._lease()
    (lease,) = hosts.runner.leases()  # type: ignore[attr-defined]
    ack(hosts, lease, [[t0 + 1.0, None]])
    windows, records = hosts.stop(timeout=0.05)  # the host never answers the last lease
    last = hosts.runner.leases()[-1]  # type: ignore[attr-defined]
    assert last.windows == []
    _, final = hosts.publish.calls[-1]  # type: ignore[attr-defined]
    assert final
    assert hosts.ledger.phases.settled >= last.sent
    assert "slow" in {label for s in hosts.ledger.phases.segments for label in s.labels}
    (window,) = windows
    assert (window.name, window.host, window.actual_start) == ("slow", "gpu-1", pytest.approx(t0 + 1.0))
    assert [h.name for h in records] == ["gpu-1"]


def test_each_test_has_a_new_record_and_session_while_the_host_stays(hosts):
    started(hosts, ago=1.5)
    first, ledger = hosts.id, hosts.ledger
    hosts.start(time.time())
    assert hosts._loop is not None
    hosts._loop.kill(block=False)
    assert (hosts.id == first, hosts.ledger is ledger) == (False, False)
    assert hosts.ledger.hosts["gpu-1"].boot == BOOT
