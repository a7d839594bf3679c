"""The fault timeline (faults/timeline.py): its two messages survive Locust's wire, and both timelines,
a schedule's and a cluster Workflow's, keep the same protocol: the master starts one, a worker follows
it from the clock alone and labels every instant as the master does."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict

import msgpack
import pytest

from faults import schedule
from faults.injectors import KINDS
from faults.k8s import phases
from faults.k8s.workflow import render
from faults.session import FaultSession, following
from faults.timeline import FaultClock, Phases, PhaseUpdate, Segment, Timeline
from llmchaos.run import FaultWindow
from tests.unit.faults.k8s.test_phases import CLUSTER, HORIZON, SCHEDULE, replayed

REMOTE = """faults:
  - {name: slow, kind: gpu_clock, target: {host: gpu-1, sim: "http://127.0.0.1:9"}, at: 10s, duration: 10s,
     params: {graphics_mhz: 660}}
"""


def wire(message: dict) -> dict:
    """A payload as Locust carries it between master and worker (msgpack)."""
    return msgpack.unpackb(msgpack.packb(message))


def test_decided_phases_reach_a_worker_as_the_master_has_them():
    master, worker = Phases(), Phases()
    first = [Segment(10.0, 12.0, ("slow",)), Segment(12.0, 15.0, ("jitter", "slow"))]
    master.extend(first, 15.0)
    worker.absorb(PhaseUpdate.from_message(wire(asdict(master.update(first)))))
    later = [Segment(18.0, 20.0, ("slow:unconfirmed",))]
    master.extend(later, 25.0)
    worker.absorb(PhaseUpdate.from_message(wire(asdict(master.update(later)))))
    instants = [9.9, 10.0, 11.9, 12.0, 14.99, 15.0, 17.0, 18.0, 19.99, 20.0, 24.0]
    assert [worker.labels(t) for t in instants] == [master.labels(t) for t in instants]
    assert worker.labels(12.0) == ("jitter", "slow")
    assert worker.settled == master.settled == 25.0


def test_a_fault_clock_reads_back_as_sent():
    clock = FaultClock(1_780_000_000.25, schedule="drills.yaml", horizon=90.0)
    assert FaultClock.from_message(wire(asdict(clock))) == clock
    assert (
        FaultClock.from_message(wire(asdict(FaultClock(5.0, workflow="staging/drills")))).workflow == "staging/drills"
    )
    assert FaultClock.from_message({"t0": "12.5"}) == FaultClock(12.5)  # an older master's: the start alone


def from_schedule(tmp_path, monkeypatch) -> tuple[Timeline, float]:
    """A schedule's timeline on the master, and a start an hour ahead: starting it applies nothing
    here, and the labels are the schedule's all the same."""
    path = tmp_path / "drills.yaml"
    path.write_text(SCHEDULE)
    session = FaultSession(str(path), str(tmp_path / "journal.json"), horizon=HORIZON, prepare_targets=False)
    return session, float(int(time.time()) + 3600)


def from_cluster(tmp_path, monkeypatch) -> tuple[Timeline, float]:
    """A Workflow's timeline, read through a fake API (each process reads the cluster itself)."""
    path = tmp_path / "drills.yaml"
    path.write_text(SCHEDULE)
    workflow = render(schedule.load(str(path), KINDS), str(path), CLUSTER, HORIZON).run[0]
    started = int(time.time()) - 30
    until = started + 2 * HORIZON + 30  # past every instant asked: each settled
    monkeypatch.setitem(phases._SHARED, "staging/drills", replayed(workflow, started, until))
    return replayed(workflow, started, until), float(started)


@pytest.mark.parametrize("opened", [from_schedule, from_cluster])
def test_both_timelines_keep_the_protocol_and_a_worker_labels_as_its_master(
    opened: Callable[..., tuple[Timeline, float]], tmp_path, monkeypatch
):
    master, t0 = opened(tmp_path, monkeypatch)
    assert isinstance(master, Timeline)
    clock = master.start(t0)
    assert clock.t0 == t0
    worker = following(FaultClock.from_message(wire(asdict(clock))))
    assert type(worker) is type(master)
    assert worker is not None
    instants = [t0 + i * 0.5 for i in range(-10, 2 * int(HORIZON) + 20)]
    labels = [master.phase(t) for t in instants]
    assert [worker.phase(t) for t in instants] == labels
    assert {"jitter+narrow", "slow-gpu", "baseline"} <= set(labels)
    assert all(master.settled(t) and worker.settled(t) for t in instants)  # neither waits on a fault host
    assert {name for name, _, _, _ in master.active()} == {"jitter", "narrow", "slow-gpu", "chunk-drop", "frozen"}
    windows, hosts = master.stop()
    assert all(isinstance(w, FaultWindow) for w in windows)
    assert hosts == []


def test_a_worker_waits_for_its_master_to_decide_a_fault_hosts_window(tmp_path):
    path = tmp_path / "remote.yaml"
    path.write_text(REMOTE)
    worker = following(FaultClock(1000.0, schedule=str(path), horizon=60.0))
    assert isinstance(worker, FaultSession)
    assert not worker.settled(1012.0)
    assert worker.phase(1012.0) == "slow:unconfirmed"  # planned, not heard: never baseline
    worker.absorb(PhaseUpdate([[1010.2, 1020.1, ["slow"]]], settled=1015.0))
    assert (worker.settled(1012.0), worker.settled(1016.0)) == (True, False)
    assert (worker.phase(1010.1), worker.phase(1012.0)) == ("baseline", "slow")
    worker.follow(FaultClock(2000.0, schedule=str(path), horizon=60.0))  # the next test: nothing heard yet
    assert not worker.settled(2012.0)


def test_no_faults_no_timeline():
    assert following(FaultClock(1000.0)) is None
