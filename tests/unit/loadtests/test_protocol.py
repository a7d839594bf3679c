"""The master's and the workers' ends of the protocol over a fake transport (as Locust's own tests
drive its runners): each message goes straight to the handler the other end registered, and every
one is recorded. No Locust process, no socket."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from faults.timeline import FaultClock, PhaseUpdate
from loadtests import protocol
from loadtests.protocol import Master, Shipment, Worker


class Hook:
    """Locust's EventHook as the protocol uses it."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def add_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def fire(self, **kw: Any) -> None:
        for listener in self.listeners:
            listener(**kw)


@dataclass
class Message:
    type: str
    data: Any
    node_id: str


class Runner:
    """A runner's messaging: handlers by type, and what it sent (type, data, to)."""

    def __init__(self, bus: Bus, node_id: str) -> None:
        self.bus, self.node_id = bus, node_id
        self.handlers: dict[str, Any] = {}
        self.sent: list[tuple[str, Any, str | None]] = []
        self.environment = SimpleNamespace(events=SimpleNamespace(worker_report=Hook(), report_to_master=Hook()))
        self.user_count = 1
        self.stopped = False

    def register_message(self, kind: str, handler: Any) -> None:
        self.handlers[kind] = handler

    def stop(self) -> None:
        self.stopped = True


class MasterRunner(Runner):
    @property
    def clients(self) -> dict[str, SimpleNamespace]:
        return {w: SimpleNamespace(id=w) for w in self.bus.workers}

    def send_message(self, kind: str, data: Any, client_id: str) -> None:
        self.sent.append((kind, data, client_id))
        self.bus.workers[client_id].handlers[kind](Message(kind, data, "master"))


class WorkerRunner(Runner):
    def send_message(self, kind: str, data: Any) -> None:
        self.sent.append((kind, data, None))
        if self.bus.answers:
            self.bus.master.handlers[kind](Message(kind, data, self.node_id))


@dataclass
class Bus:
    master: MasterRunner = field(init=False)
    workers: dict[str, WorkerRunner] = field(default_factory=dict)
    answers: bool = True  # workers' messages reach the master

    def report(self, worker: str) -> None:
        """Locust's periodic report: the worker fills it, the master hears it."""
        data: dict[str, Any] = {}
        self.workers[worker].environment.events.report_to_master.fire(client_id=worker, data=data)
        self.master.environment.events.worker_report.fire(client_id=worker, data=data)


class Harness:
    """What the ends ask of the harness, recorded."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[str, Any]] = []
        self.shipped = 0

    def plan(self, t0: float, worker: int, workers: int) -> dict[str, Any] | None:
        return {"t0": t0, "worker": worker, "of": workers}

    def start_source(self, plan: dict[str, Any]) -> None:
        self.calls.append(("start_source", plan))

    def follow_faults(self, clock: FaultClock) -> None:
        self.calls.append(("follow_faults", clock))

    def follow_phases(self, update: PhaseUpdate) -> None:
        self.calls.append(("follow_phases", update))

    def shipment(self, streaming: bool) -> Shipment:
        self.shipped += 1
        return Shipment({"from": self.name, "n": self.shipped, "streaming": streaming}, {}, {})

    def absorb(self, process: str, shipment: Shipment) -> None:
        self.calls.append(("absorb", (process, shipment)))


def cluster(n: int) -> tuple[Bus, Master, Harness, dict[str, Harness]]:
    bus = Bus()
    bus.master = MasterRunner(bus, "master")
    harnesses = {}
    for i in range(n):
        wid = f"w{i}"
        bus.workers[wid] = WorkerRunner(bus, wid)
        harnesses[wid] = Harness(wid)
        Worker(bus.workers[wid], harnesses[wid])  # type: ignore[arg-type]
    master_harness = Harness("master")
    return bus, Master(bus.master, master_harness), master_harness, harnesses  # type: ignore[arg-type]


def test_each_worker_gets_its_share_of_the_plan_and_the_fault_clock():
    bus, master, _, workers = cluster(3)
    clock = FaultClock(100.0, schedule="drills.yaml", horizon=60.0)
    master.start(clock, plan_t0=101.0)
    for i, (_, h) in enumerate(sorted(workers.items())):
        assert h.calls == [("follow_faults", clock), ("start_source", {"t0": 101.0, "worker": i, "of": 3})]
    master.start(None, plan_t0=5.0)  # no faults: no clock
    assert [kind for kind, _, _ in bus.master.sent] == ["llmchaos_faults", "llmchaos_plan"] * 3 + ["llmchaos_plan"] * 3


def test_phases_go_to_every_worker():
    _, master, _, workers = cluster(2)
    update = PhaseUpdate([[1.0, 2.0, ["jitter"]]], settled=2.0)
    master.phases(update)
    assert all(h.calls == [("follow_phases", update)] for h in workers.values())


def test_each_report_carries_the_workers_shipment_to_the_master():
    bus, _, master_h, workers = cluster(2)
    bus.workers["w1"].user_count = 0  # no users: nothing streams, the worker may take its time
    bus.report("w0")
    bus.report("w1")
    bus.report("w0")
    absorbed = [(p, s.collector) for kind, (p, s) in master_h.calls if kind == "absorb"]
    assert absorbed == [
        ("w0", {"from": "w0", "n": 1, "streaming": True}),
        ("w1", {"from": "w1", "n": 1, "streaming": False}),
        ("w0", {"from": "w0", "n": 2, "streaming": True}),
    ]
    assert workers["w0"].calls == []  # a report is all the master needs: nothing back


def test_the_source_is_done_when_every_worker_says_so():
    bus, master, _, _ = cluster(2)
    assert not master.all_shares_done()
    bus.workers["w0"].send_message(protocol.SHARE_DONE, None)
    assert not master.all_shares_done()
    bus.workers["w1"].send_message(protocol.SHARE_DONE, None)
    assert master.all_shares_done()
    master.start(None, plan_t0=0.0)  # a new test: its shares are not done yet
    assert not master.all_shares_done()


def test_at_stop_every_worker_stops_and_ships_the_rest():
    bus, master, master_h, _ = cluster(2)
    master.collect_finals()
    assert all(w.stopped for w in bus.workers.values())
    finals = {p: s.collector for kind, (p, s) in master_h.calls if kind == "absorb"}
    assert finals == {w: {"from": w, "n": 1, "streaming": False} for w in ("w0", "w1")}
    assert master.settled()


def test_a_worker_that_never_answers_is_named_and_the_totals_not_settled(monkeypatch, caplog):
    bus, master, _, _ = cluster(2)
    bus.answers = False
    monkeypatch.setattr(protocol, "FINAL_WAIT_S", 0.1)
    with caplog.at_level(logging.WARNING, logger="llmchaos"):
        master.collect_finals()
    assert "no final data from 2 worker(s)" in caplog.text
    assert "'w0', 'w1'" in caplog.text
    assert not master.settled()


def test_payloads_read_back_as_their_types():
    shipment = Shipment({"hist": []}, {"cpu": [0.5]}, {})
    assert Shipment.from_message(shipment.message()) == shipment
    assert Shipment.from_message({"collector": {}, "watch": {}}).source == {}  # a worker that ships no source data
