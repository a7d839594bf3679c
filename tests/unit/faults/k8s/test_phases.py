"""The phases from the cluster: a synthetic run labelled from recorded WorkflowNodes exactly as the
single-host runner labels it from the schedule, and by the cluster's times where they differ from the
plan; the live reader through a Workflow's life; `llmchaos k8s wait`, which the GPU Job follows."""

import copy
import time
from pathlib import Path

import pytest

from faults import schedule
from faults.injectors import KINDS
from faults.k8s import phases
from faults.k8s.cluster import Cluster
from faults.k8s.evidence import Seen
from faults.k8s.workflow import render
from faults.session import FaultSession
from llmchaos.run import FaultWindow
from tests.procs import ROOT
from tests.servers.chaos_mesh import UNSCHEDULABLE, ChaosMesh
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
    """What the API answers, changed by the test as the Workflow's life goes on: nothing, then a
    fake Chaos Mesh running it (tests/servers/chaos_mesh.py), then nothing again (deleted)."""

    def __init__(self) -> None:
        self.mesh: ChaosMesh | None = None
        self.reads = 0

    def read(self) -> Seen:
        self.reads += 1
        return self.mesh.seen(time.time()) if self.mesh else Seen(None, [])


def running(workflow: dict, t0: int, **fail: str) -> ChaosMesh:
    started = copy.deepcopy(workflow) | {"status": {"startTime": nodes(workflow, t0)[0]["spec"]["startTime"]}}
    return ChaosMesh(started, t0, fail={k.replace("_", "-"): v for k, v in fail.items()})


def test_the_live_reader_follows_the_workflow_and_its_deletion(planned):
    _, workflow = planned
    api = Cluster_()
    t0 = int(time.time()) - 18  # the Workflow started 18 s ago: jitter and narrow are on
    live = phases.ClusterPhases("staging/drills", api.read, poll_s=3600)
    assert (live.namespace, live.name) == ("staging", "drills")
    assert live.phase(time.time()) == "baseline"
    assert live.stop() == ([], [])  # no window ran, and a cluster has no fault hosts
    api.mesh = running(workflow, t0)
    live.poll()
    assert live.phase(t0 + 16) == "jitter+narrow"  # each from its Apply, a second into its step
    assert live.phase(t0 + 15.5) == "jitter"  # narrow's step had started, its fault not yet
    assert live.phase(time.time()) == "jitter+narrow"
    assert ("jitter", "netem", '{"interface": "eth0"}', True) in live.active()
    api.mesh = None  # kubectl delete workflow drills: Chaos Mesh recovers everything
    live.poll()
    deleted = time.time()
    assert live.phase(deleted + 1) == "baseline"
    assert live.phase(t0 + 16) == "jitter+narrow"  # what ran before stays as it ran
    windows = {w.name: w for w in live.stop()[0]}
    assert windows["narrow"].actual_start == t0 + 16  # its Apply
    assert windows["narrow"].planned_start == t0 + 15
    assert (windows["slow-gpu"].actual_start, windows["slow-gpu"].actual_end) == (t0 + 1, t0 + 13)  # its Job's record
    assert windows["jitter"].actual_end == pytest.approx(deleted, abs=0.5)
    assert windows["narrow"].actual_end == pytest.approx(deleted, abs=0.5)
    assert "chunk-drop" not in windows  # it never started


@pytest.mark.parametrize("how", ["annotation", "condition"])
def test_an_aborted_workflow_ends_its_windows_at_the_abort(planned, how):
    """`kubectl annotate workflow drills workflow.chaos-mesh.org/abort=true`, or the Aborted condition
    Chaos Mesh then sets on the nodes: whatever was on ends at the read that saw it, and what was
    still to come never starts (its nodes may still come to be, recording nothing injected)."""
    _, workflow = planned
    api = Cluster_()
    t0 = int(time.time()) - 20
    api.mesh = running(workflow, t0)
    live = phases.ClusterPhases("staging/drills", api.read, poll_s=3600)
    assert live.phase(time.time()) == "jitter"
    api.mesh.abort(int(time.time()))
    if how == "condition":  # the nodes' condition alone, as a reader that missed the annotation sees it
        del api.mesh.workflow["metadata"]["annotations"][phases.ABORT]
    live.poll()
    seen = time.time()
    assert live.phase(seen + 1) == "baseline"
    windows = {w.name: w for w in live.stop()[0]}
    assert windows["jitter"].actual_end == pytest.approx(seen, abs=0.5)
    assert "chunk-drop" not in windows  # planned after the abort: it never ran
    assert phases.wait(api.read, "chunk-drop", "start", poll_s=0.01) == 1  # the GPU Job would not lock
    assert phases.wait(api.read, "jitter-0", "end", poll_s=0.01) == 0  # it would reset now


def test_a_step_still_on_when_the_test_stops_says_so(planned):
    _, workflow = planned
    api = Cluster_()
    t0 = int(time.time()) - 27
    api.mesh = running(workflow, t0)
    windows = {w.name: w for w in phases.ClusterPhases("staging/drills", api.read, poll_s=3600).stop()[0]}
    assert windows["chunk-drop"].actual_start == t0 + 26  # its Task pod's start
    assert windows["chunk-drop"].actual_end is None
    assert windows["chunk-drop"].error == "still on in the cluster when the test ended"
    assert windows["slow-gpu"].error is None
    assert windows["slow-gpu"].actual_end == t0 + 13


class Clock:
    """A run's time, stepped by the test: the fake cluster and the reader both read it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def reader(mesh: ChaosMesh, clock: Clock) -> phases.ClusterPhases:
    return phases.ClusterPhases("staging/drills", lambda: mesh.seen(clock.now), poll_s=3600, clock=clock)


def replayed(workflow: dict, t0: int, until: float, **fail: str) -> phases.ClusterPhases:
    """A reader that read the fake cluster every second from before `t0` to `until`."""
    clock = Clock(t0 - 1)
    live = reader(running(workflow, t0, **fail), clock)
    while clock.now < until:
        clock.now += 1
        live.poll()
    return live


FAILED = {  # each failure the fake controller plays, on a step of the drills, and what the reader says
    "narrow": ("nothing-selected", "selected no pod"),
    "frozen": ("apply-failed", "Apply failed: connection refused"),
    "jitter-0": ("webhook", "no chaos object: refused at its creation (a webhook)?"),
    "chunk-drop": ("pending", "its pod is Pending"),
    "slow-gpu": ("unscheduled", f"the GPU Job was not scheduled: Unschedulable {UNSCHEDULABLE}"),
}


def test_each_failure_of_the_cluster_comes_out_unconfirmed(planned):
    _, workflow = planned
    live = replayed(workflow, T0, T0 + HORIZON, **{step: how for step, (how, _) in FAILED.items()})
    windows: dict[str, FaultWindow] = {}
    for w in live.stop()[0]:
        windows.setdefault(w.name, w)  # a repeated window's first
    for step, (_, why) in FAILED.items():
        window = step.removesuffix("-0")
        w = windows[window]
        assert (w.actual_start, w.actual_end) == (None, None), w
        assert w.error == f"unconfirmed: {why}"
        (stretch,) = w.unconfirmed  # its step's planned stretch, from its node
        assert live.phase(stretch[0] + 0.5).split("+").count(f"{window}:unconfirmed") == 1
    assert live.phase(T0 + 56.5) == "jitter"  # jitter's second window applied: its first only was refused
    assert live.phase(T0 + 11) == "jitter:unconfirmed+slow-gpu:unconfirmed"


def test_the_runbook_shows_each_failure_as_the_reader_words_it():
    runbook = (Path(ROOT) / "docs" / "kubernetes.md").read_text(encoding="utf-8")
    for _, why in FAILED.values():
        shown = why.replace(UNSCHEDULABLE, "...").replace("connection refused", "MESSAGE")
        assert f'`error: "unconfirmed: {shown}"`' in runbook, shown


def test_without_failures_every_window_runs_from_its_apply(planned):
    _, workflow = planned
    live = replayed(workflow, T0, T0 + HORIZON)
    assert [(w.name, w.actual_start, w.actual_end, w.error) for w in live.stop()[0]] == [
        ("slow-gpu", T0 + 1, T0 + 13, None),  # its Job's lock and reset
        ("jitter", T0 + 11, T0 + 30, None),  # the first Apply, the node's deadline (its object gone then)
        ("narrow", T0 + 16, T0 + 20, None),
        ("chunk-drop", T0 + 27, T0 + 57, None),  # as its Task's `faults run` recorded it (its container began at 26)
        ("frozen", T0 + 41, T0 + 43, None),
        ("jitter", T0 + 56, T0 + 75, None),
    ]


def test_a_request_in_an_undecided_step_waits_for_its_record(planned):
    """A step on, its fault's Apply not read yet: a request started in it waits (not settled) until
    the record says applied (labelled from the Apply's time on) or the step ends without one."""
    _, workflow = planned
    clock = Clock(T0 + 15.2)  # narrow's node started; its Apply comes at T0 + 16
    mesh = running(workflow, T0)
    live = reader(mesh, clock)
    assert live.settled(T0 + 12)  # jitter's, applied at T0 + 11
    assert live.phase(T0 + 12) == "jitter+slow-gpu"
    assert not live.settled(T0 + 15.1)  # narrow's step on, its Apply not read
    assert not live.settled(T0 + 15.3)  # after the read: not known at all
    clock.now = T0 + 16.2
    live.poll()
    assert live.settled(T0 + 15.1)
    assert live.phase(T0 + 15.5) == "jitter"  # before narrow's Apply: not in it
    assert live.phase(T0 + 16) == "jitter+narrow"
    clock.now = T0 + 25.5  # chunk-drop's Task pod made, still Pending (its image, its node): not yet a failure
    live.poll()
    assert not live.settled(T0 + 25.2)
    clock.now = T0 + 26.5
    live.poll()
    assert not live.settled(T0 + 26.2)  # its container started at T0 + 26: its window's record comes as it ends
    assert ("chunk-drop", "sse", '{"proxy": "127.0.0.1:9100"}', True) in live.active()  # on, as far as is known
    clock.now = T0 + 41.5
    mesh.lag = 2  # frozen's Apply late: T0 + 42
    live.poll()
    assert not live.settled(T0 + 41.2)
    live.close()  # the test stopped: what waits is decided as it stands (a Task on: from its container's start)
    assert live.settled(T0 + 41.2)
    assert live.phase(T0 + 41.2) == "chunk-drop+frozen:unconfirmed"
    assert live.phase(T0 + 27.5) == "chunk-drop+jitter"  # its container began at 27 (lag 2 by then)


def test_a_task_window_is_labelled_from_its_record_once_its_pod_ends(planned):
    """A Task pod started late (its image pulled past its window's planned end): its requests wait
    for its record, and the window is where `faults run` set it, not where it was planned."""
    _, workflow = planned
    clock = Clock(T0 + 26.5)
    mesh = running(workflow, T0)
    live = reader(mesh, clock)
    assert not live.settled(T0 + 26.2)
    clock.now = T0 + 57.5  # its window cleared at 57, its pod's end not reported yet
    live.poll()
    assert not live.settled(T0 + 56.5)
    clock.now = T0 + 58.5
    live.poll()
    assert live.settled(T0 + 56.5)
    assert live.phase(T0 + 26.5) == "jitter"  # the container had started; the fault was set at 27
    assert live.phase(T0 + 27) == "chunk-drop+jitter"
    assert live.phase(T0 + 56.5) == "chunk-drop+jitter"
    assert live.phase(T0 + 57) == "jitter"
    late = running(workflow, T0)
    late.lag = 40  # its container 40 s into its step: its window past the planned one
    live = reader(late, Clock(T0 + 70))
    (task,) = [r for r in live.runs if r.step == "chunk-drop"]
    assert task.end == T0 + 55  # planned
    assert task.applied is None  # on since T0 + 65, no record yet
    assert task.may_cover(T0 + 68)  # so a request there waits: up to the node's deadline, not its plan
    assert not live.settled(T0 + 68)


def test_the_reader_keeps_its_timeline_when_the_api_fails_a_moment(planned):
    _, workflow = planned
    t0 = int(time.time()) - 18  # jitter and narrow on, each applied
    mesh = running(workflow, t0)
    answers = [mesh.seen(time.time()), ConnectionError("api server gone a moment")]

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
    answers = iter([Seen(workflow, []), Seen(None, [])])
    assert phases.wait(lambda: next(answers), "slow-gpu", "start", poll_s=0.01) == 1
    answers = iter([Seen(workflow, []), Seen(None, [])])
    assert phases.wait(lambda: next(answers), "slow-gpu", "end", poll_s=0.01) == 0
    assert phases.wait(lambda: Seen(None, []), "slow-gpu", "end") == 0  # none there: its steps are over


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
