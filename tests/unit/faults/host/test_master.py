"""Which hello the master believes for a fault host's name: a new run of it, never an earlier run's
(a captured hello replayed), never a second run while the one it follows is alive (two hosts given one
name), which it names (issue 34, defect 4). The master is FaultHosts over a fake runner."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from faults.host import messages as m
from faults.host.ledger import LOST_S
from faults.host.master import FaultHosts
from faults.host.seal import seal
from faults.session import FaultSession

SECRET = b"s" * 24
SCHEDULE = """faults:
  - {name: slow, kind: gpu_clock, target: {host: gpu-1, sim: "http://127.0.0.1:9"}, at: 1s, duration: 1s,
     params: {graphics_mhz: 660}}
"""


@dataclass
class Message:
    data: object
    node_id: str


class Runner:
    def register_message(self, kind: str, handler: object) -> None:
        pass


@pytest.fixture
def hosts(tmp_path) -> FaultHosts:
    path = tmp_path / "schedule.yaml"
    path.write_text(SCHEDULE)
    session = FaultSession(str(path), str(tmp_path / "journal.json"))
    return FaultHosts(Runner(), session, SECRET, lambda segments, final: None)  # type: ignore[arg-type]


def hello(hosts: FaultHosts, boot: str, started: float) -> None:
    node = f"llmchaos-fault-host.gpu-1.{boot}"
    body = m.body(m.Hello("gpu-1", boot, {}, 1.0, started))
    hosts._hello(Message(seal(SECRET, m.HELLO, node, body), node))  # type: ignore[arg-type]


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
