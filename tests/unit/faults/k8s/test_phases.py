"""The phases from the cluster: a synthetic run labelled from recorded WorkflowNodes exactly as the
single-host runner labels it from the schedule, and by the cluster's times where they differ from the
plan; the live reader through a Workflow's life; `llmchaos k8s wait`, which the GPU Job follows."""

import copy
import time

import pytest

from faults import schedule
from faults.injectors import KINDS
from faults.k8s import phases
from faults.k8s.cluster import Cluster
from faults.k8s.workflow import render
from faults.session import FaultSession
from tests.unit.faults.k8s.recorded import nodes
from tests.unit.faults.k8s.schemas import errors

SCHEDULE = """\
seed: 7
faults:
  - {name: jitter, kind: netem, target: {interface: eth0}, at: 10s, duration: 20s, every: 45s,
     params: {delay: 100ms, jitter: 30ms}}
  - {name: narrow, kind: tbf, target: {interface: eth1}, at: 15s, duration: 5s, params: {rate: 8mbit}}
  - {name: slow-gpu, kind: gpu_clock, target: {gpu: 0}, at: 0s, duration: 12s, params: {graphics_mhz: 500}}
  - {name: chunk-drop, kind: sse, target: {proxy: "127.0.0.1:9100"}, at: 25s, duration: 30s,
     params: {drop_ratio: 0.15}}
  - {name: frozen, kind: docker, target: {label: "app=llm"}, at: 40s, duration: 3s, params: {action: pause,
     cluster: partition}}
"""
HORIZON = 100.0
T0 = 1_780_000_000  # a whole second: Kubernetes records times so
CLUSTER = Cluster(run="drills", selector={"app": "llm"}, upstream="http://llm:8000")


@pytest.fixture
def planned(tmp_path):
    path = tmp_path / "drills.yaml"
    path.write_text(SCHEDULE)
    workflow = render(schedule.load(str(path), KINDS), str(path), CLUSTER, HORIZON).run[0]
    return str(path), workflow


def single_host(path: str, t0: float) -> FaultSession:
    """The single-host runner's labelling of a run whose schedule started at `t0`."""
    session = FaultSession(path, horizon=HORIZON, prepare_targets=False)
    session.t0 = t0
    return session


def instants(start: float, end: float, step: float = 0.25) -> list[float]:
    return [start + i * step for i in range(int((end - start) / step))]


def test_recorded_nodes_are_what_the_crd_describes(planned):
    _, workflow = planned
    recorded = nodes(workflow, T0, until=T0 + 30)
    assert len(recorded) > 10
    assert [e for node in recorded for e in errors(node)] == []


def test_a_synthetic_run_is_labelled_exactly_as_the_single_host_runner_would(planned):
    path, workflow = planned
    runs = phases.steps(workflow, nodes(workflow, T0))
    host = single_host(path, T0)
    labels = {t: phases.phase(runs, t) for t in instants(T0 - 5, T0 + HORIZON + 10)}
    assert labels == {t: host.phase(t) for t in labels}
    assert {"jitter+narrow", "chunk-drop+jitter", "chunk-drop+frozen", "slow-gpu", "baseline"} <= set(labels.values())


def test_the_cluster_times_win_over_the_plan(planned, tmp_path):
    """A step that started 3 s late (its wait ran long) labels by when it really ran."""
    _path, workflow = planned
    runs = phases.steps(workflow, nodes(workflow, T0, late={"narrow": 3}))
    shifted = tmp_path / "shifted.yaml"
    shifted.write_text(SCHEDULE.replace("at: 15s, duration: 5s", "at: 18s, duration: 5s"))
    host = single_host(str(shifted), T0)
    labels = {t: phases.phase(runs, t) for t in instants(T0, T0 + HORIZON)}
    assert labels == {t: host.phase(t) for t in labels}
    assert phases.phase(runs, T0 + 16) == "jitter"  # planned narrow, not yet on in the cluster


def test_an_sse_step_holds_its_window_not_its_deadline(planned):
    _, workflow = planned
    task = next(t for t in workflow["spec"]["templates"] if t["name"] == "chunk-drop")
    assert task["deadline"] == "150s"  # the window and the pod's start
    run = next(r for r in phases.steps(workflow, nodes(workflow, T0)) if r.step == "chunk-drop")
    assert (run.start, run.end) == (T0 + 25, T0 + 55)


def test_nodes_of_another_workflow_are_not_ours(planned):
    _, workflow = planned
    other = nodes(workflow, T0 - 50)
    for node in other:
        node["spec"]["workflowName"] = "another"
    runs = phases.steps(workflow, other)
    assert all(r.start is None for r in runs)
    assert phases.phase(runs, T0 + 16) == "baseline"


class Cluster_:
    """What the API answers, changed by the test as the Workflow's life goes on."""

    def __init__(self) -> None:
        self.workflow: dict | None = None
        self.nodes: list[dict] = []
        self.reads = 0

    def read(self) -> phases.Snapshot:
        self.reads += 1
        return self.workflow, self.nodes


def test_the_live_reader_follows_the_workflow_and_its_deletion(planned):
    _, workflow = planned
    api = Cluster_()
    t0 = int(time.time()) - 20  # the Workflow started 20 s ago
    live = phases.ClusterPhases("staging/drills", api.read, poll_s=3600)
    assert (live.namespace, live.name) == ("staging", "drills")
    assert live.phase(time.time()) == "baseline"
    assert live.stop() == ([], [])  # no window ran, and a cluster has no fault hosts
    api.workflow = workflow | {"status": {"startTime": nodes(workflow, t0)[0]["spec"]["startTime"]}}
    api.nodes = nodes(workflow, t0, until=time.time())
    live.poll()
    assert live.phase(t0 + 16) == "jitter+narrow"
    assert live.phase(time.time()) == "jitter"  # 10 s into its first 20 s window
    assert ("jitter", "netem", '{"interface": "eth0"}', True) in live.active()
    api.workflow, api.nodes = None, []  # kubectl delete workflow drills: Chaos Mesh recovers everything
    live.poll()
    deleted = time.time()
    assert live.phase(deleted + 1) == "baseline"
    assert live.phase(t0 + 16) == "jitter+narrow"  # what ran before stays as it ran
    windows = {w.name: w for w in live.stop()[0]}
    assert windows["narrow"].actual_start == t0 + 15
    assert windows["narrow"].actual_end == t0 + 20
    assert windows["narrow"].planned_start == t0 + 15
    assert windows["jitter"].actual_end == pytest.approx(deleted, abs=0.5)
    assert "chunk-drop" not in windows  # it never started


@pytest.mark.parametrize("how", ["annotation", "condition"])
def test_an_aborted_workflow_ends_its_windows_at_the_abort(planned, how):
    """`kubectl annotate workflow drills workflow.chaos-mesh.org/abort=true`, or the Aborted condition
    Chaos Mesh then sets on the nodes: whatever was on ends at the read that saw it, and what was
    still to come never starts (its nodes may still come to be, recording nothing injected)."""
    _, workflow = planned
    api = Cluster_()
    t0 = int(time.time()) - 20
    api.workflow = copy.deepcopy(workflow) | {"status": {"startTime": nodes(workflow, t0)[0]["spec"]["startTime"]}}
    api.nodes = nodes(workflow, t0, until=time.time())
    live = phases.ClusterPhases("staging/drills", api.read, poll_s=3600)
    assert live.phase(time.time()) == "jitter"

    def recorded(until: float) -> list[dict]:
        out = nodes(workflow, t0, until=until)
        if how == "condition":  # the entry's node, as Chaos Mesh's abort reconciler marks it
            out[0].setdefault("status", {})["conditions"] = [
                {"type": "Aborted", "status": "True", "reason": "WorkflowAborted"}
            ]
        return out

    if how == "annotation":
        api.workflow["metadata"]["annotations"][phases.ABORT] = "true"
    api.nodes = recorded(time.time())
    live.poll()
    seen = time.time()
    api.nodes = recorded(time.time() + 600)  # every later node recorded, as planned
    live.poll()
    assert live.phase(seen + 1) == "baseline"
    windows = {w.name: w for w in live.stop()[0]}
    assert windows["jitter"].actual_end == pytest.approx(seen, abs=0.5)
    assert "chunk-drop" not in windows  # planned after the abort: it never ran
    assert phases.wait(api.read, "chunk-drop", "start", poll_s=0.01) == 1  # the GPU Job would not lock
    assert phases.wait(api.read, "jitter-0", "end", poll_s=0.01) == 0  # it would reset now


def test_a_step_still_on_when_the_test_stops_says_so(planned):
    _, workflow = planned
    api = Cluster_()
    t0 = int(time.time()) - 26
    api.workflow, api.nodes = workflow, nodes(workflow, t0, until=time.time())
    windows = {w.name: w for w in phases.ClusterPhases("staging/drills", api.read, poll_s=3600).stop()[0]}
    assert windows["chunk-drop"].actual_end is None
    assert windows["chunk-drop"].error == "still on in the cluster when the test ended"
    assert windows["slow-gpu"].error is None
    assert windows["slow-gpu"].actual_end == t0 + 12


def test_the_reader_keeps_its_timeline_when_the_api_fails_a_moment(planned):
    _, workflow = planned
    t0 = int(time.time()) - 20
    answers = [(workflow, nodes(workflow, t0, until=time.time())), ConnectionError("api server gone a moment")]

    def read():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    live = phases.ClusterPhases("drills", read, poll_s=3600)
    live.poll()
    assert live.phase(t0 + 16) == "jitter+narrow"


def test_wait_for_a_step_of_a_deleted_workflow(planned):
    _, workflow = planned
    api = Cluster_()
    api.workflow = workflow
    answers = iter([(workflow, []), (None, [])])
    assert phases.wait(lambda: next(answers), "slow-gpu", "start", poll_s=0.01) == 1
    answers = iter([(workflow, []), (None, [])])
    assert phases.wait(lambda: next(answers), "slow-gpu", "end", poll_s=0.01) == 0
    assert phases.wait(lambda: (None, []), "slow-gpu", "end") == 0  # none there: its steps are over


def test_requests_are_labelled_on_time_before_a_steps_node_is_read(planned):
    """Right after the Workflow started, only its Suspend steps are recorded: their deadlines say
    when each window's step comes, so the labels need not wait for the next read."""
    path, workflow = planned
    early = nodes(workflow, T0, until=T0 + 1)
    assert {n["spec"]["templateName"] for n in early} & {"narrow", "jitter-0", "chunk-drop"} == set()
    runs = phases.steps(workflow, early)
    host = single_host(path, T0)
    labels = {t: phases.phase(runs, t) for t in instants(T0 - 5, T0 + HORIZON)}
    assert labels == {t: host.phase(t) for t in labels}
    started = workflow | {"status": {"startTime": early[0]["spec"]["startTime"]}}
    expected = phases.steps(started, [])  # nothing read but the Workflow: its start and the offsets
    assert {t: phases.phase(expected, t) for t in labels} == labels
    assert not any(r.recorded for r in expected)
