"""`llmchaos k8s wait`, which the GPU Job follows, on the wall clock: it returns when the step starts
and when it ends (the phases from the cluster: tests/unit/faults/k8s/test_phases.py)."""

import threading
import time

from faults.k8s import phases
from tests.unit.faults.k8s import test_phases as unit

Cluster_ = unit.Cluster_
planned = unit.planned  # the fixture: the drills schedule and its Workflow


def test_wait_returns_when_the_step_starts_and_when_it_ends(planned):
    _, workflow = planned
    api = Cluster_()
    t0 = int(time.time()) - 10  # slow-gpu, 12 s from the Workflow's start, ends in 1 to 2 s
    result: dict = {}

    def follow(until):
        result[until] = (phases.wait(api.read, "slow-gpu", until, poll_s=0.02), time.time())

    starting = threading.Thread(target=follow, args=("start",))
    starting.start()
    time.sleep(0.2)
    assert result == {}  # no Workflow yet: it is waited for
    api.mesh = unit.running(workflow, t0)
    starting.join(20)
    follow("end")
    assert result["start"][0] == 0
    assert result["end"][0] == 0
    assert result["end"][1] >= t0 + 12  # the step's deadline
