"""The phases of a run from the cluster: when each window's step of a Chaos Mesh Workflow really
started and ended, as its WorkflowNodes record them, and whether its fault was applied, as the
objects its step made record it (faults/k8s/evidence.py), read through the Kubernetes API.

A step's node gives its planned stretch: from its `startTime` to its `deadline` (Chaos Mesh recovers a
chaos and ends a Suspend there); before its node exists, it is expected when the Suspend before it
ends (that node's `deadline`), else at the Workflow's start plus its offset. The window itself runs
from its fault's first recorded Apply (the window a Task's `faults run` recorded, a GPU Job's lock)
to its recovery (or the node's deadline). A Task's and a GPU Job's records come as their pods end:
until then their step is undecided up to its node's deadline (a Task pod may start late, its image
pulled); a Task still running when the test stops, or when its Workflow is aborted or deleted, is
taken from its container's start. A step with no record of an Apply (a selector that
matched nothing, a failed Apply, a chaos object a webhook refused, a Task pod Pending, a GPU Job never
scheduled or ended without a lock) is `NAME:unconfirmed` over its planned stretch, never the fault's
name; a request whose start falls where a step is still undecided waits to be labelled until it is
(`settled`). An abort (`workflow.chaos-mesh.org/abort` or the Aborted condition) ends every window at
the read that saw it; a deleted Workflow ends what was on then. A request is labelled as on one host:
the windows its start falls in, sorted and joined by '+', else `baseline`. `ClusterPhases` keeps that
timeline fresh for the load test (`--k8s-workflow`), each read label-selected by the Workflow."""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from faults.k8s import evidence, kube, names
from faults.k8s.cluster import API, CHAOS
from faults.k8s.evidence import Evidence, Seen, stamp
from faults.k8s.workflow import WINDOWS
from faults.timeline import Active, FaultClock, PhaseUpdate
from llmchaos.errors import UsageError
from llmchaos.run import FaultHost, FaultWindow

log = logging.getLogger("llmchaos.faults")

GROUP, VERSION = API.split("/")
POLL_S = 1.0
RECORD_S = 30.0  # how long past its step a pod's record may take (a Task's, a GPU Job's): its end, the kubelet's report
UNCONFIRMED = ":unconfirmed"
ABORT = "workflow.chaos-mesh.org/abort"  # Chaos Mesh's annotation: "true" aborts a Workflow
SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass(frozen=True)
class StepRun:
    step: str  # the template's name
    window: str
    kind: str
    target: dict
    params: dict
    at: float  # planned, from the Workflow's start
    duration: float
    start: float | None = None  # unix times, as the cluster recorded them (or expects them)
    end: float | None = None
    until: float | None = None  # the latest it may be on while undecided: a Task node's deadline, else `end`
    recorded: bool = False  # its own node has started: the times are the cluster's record
    node: str = ""  # that node's name
    job: str = ""  # a GPU window's Job, NAMESPACE/NAME
    applied: bool | None = None  # its fault's Apply recorded (times: the fault's), or never (why); None: undecided
    why: str | None = None

    def covers(self, t: float) -> bool:
        return self.start is not None and self.start <= t < (self.end if self.end is not None else float("inf"))

    def may_cover(self, t: float) -> bool:
        """Whether its fault may be on at `t`, as far as is known now."""
        if self.applied is not None:
            return self.covers(t)
        last = self.until if self.until is not None else self.end
        return self.start is not None and self.start <= t < (last if last is not None else float("inf"))

    def label(self) -> str:
        return self.window + (UNCONFIRMED if self.applied is False else "")


def steps(workflow: dict, nodes: list[dict]) -> list[StepRun]:
    """Every window step of `workflow`, with its start and end where they are known."""
    windows = json.loads(workflow["metadata"].get("annotations", {}).get(WINDOWS, "{}"))
    ran: dict[str, dict] = {}
    names: dict[str, str] = {}
    for node in nodes:
        spec = node.get("spec", {})
        if spec.get("workflowName") == workflow["metadata"]["name"] and "startTime" in spec:
            ran[spec.get("templateName", "")] = spec
            names[spec.get("templateName", "")] = node.get("metadata", {}).get("name", "")
    began = workflow.get("status", {}).get("startTime") or workflow["metadata"].get("creationTimestamp")
    out = []
    for step, w in windows.items():
        run = StepRun(
            step, w["window"], w["kind"], w["target"], w["params"], w["at"], w["duration"], job=w.get("job", "")
        )
        own, wait = ran.get(step), ran.get(f"{step}-wait", {})
        if own is not None:
            start = stamp(own["startTime"])
            deadline = stamp(own["deadline"]) if "deadline" in own else None
            end = deadline if deadline is not None and w["kind"] != "sse" else start + w["duration"]
            until = max(end, deadline) if deadline is not None else end
            run = replace(run, start=start, end=end, until=until, recorded=True, node=names[step])
        elif "deadline" in wait or began:
            start = stamp(wait["deadline"]) if "deadline" in wait else stamp(began) + w["at"]
            run = replace(run, start=start, end=start + w["duration"])
        out.append(run)
    return out


def aborted(workflow: dict, nodes: list[dict]) -> bool:
    """Whether `workflow` is aborted: its annotation set, or a node of it with the Aborted condition."""
    if workflow["metadata"].get("annotations", {}).get(ABORT) == "true":
        return True
    name = workflow["metadata"]["name"]
    return any(
        c.get("type") == "Aborted" and c.get("status") == "True"
        for n in nodes
        if n.get("spec", {}).get("workflowName") == name
        for c in n.get("status", {}).get("conditions") or []
    )


def confirm(run: StepRun, found: Evidence | None, now: float) -> StepRun:
    """`run` (its node's times) with what the cluster recorded of its fault: the fault's own times
    once it applied; unconfirmed once its step is over with no Apply (why: what the cluster said
    last, as Chaos Mesh and the kubelet retry until then); else undecided."""
    if run.applied is not None or run.start is None or run.end is None:
        return run
    if found is not None and found.applied is not None:
        end = found.recovered or (found.applied + run.duration if run.kind == "sse" else run.end)
        return replace(run, start=found.applied, end=end, applied=True)
    if now > (run.until or run.end) + (RECORD_S if run.kind in ("gpu_clock", "sse") else 0.0):
        return replace(run, applied=False, why=found.why if found and found.why else _silence(run, found))
    return run


def _silence(run: StepRun, found: Evidence | None) -> str:
    if not run.recorded:
        return "its step never started"
    if run.kind == "gpu_clock":
        return "no record of the GPU Job's lock" if found else "no pod of its GPU Job"
    if found is None:
        return "no Task pod" if run.kind == "sse" else "no chaos object: refused at its creation (a webhook)?"
    return "no record of an Apply"


def phase(runs: list[StepRun], t: float) -> str:
    """The phase of a request that started at unix time `t`."""
    return "+".join(sorted({r.label() for r in runs if r.covers(t)})) or "baseline"


def default_namespace() -> str:
    """The pod's own namespace, else the kubeconfig context's, else `default`."""
    try:
        return Path(SA_NAMESPACE).read_text().strip()
    except OSError:
        pass
    from kubernetes import config

    try:
        return str(
            config.list_kube_config_contexts(os.environ.get("KUBECONFIG"))[1]["context"].get("namespace", "default")
        )
    except Exception:  # noqa: BLE001 - no kubeconfig, or one without contexts: the API's default
        return "default"


def reference(ref: str, field: str = "--k8s-workflow") -> tuple[str, str]:
    """(namespace, name) from `[NAMESPACE/]NAME`."""
    namespace, _, name = ref.rpartition("/")
    if not name:
        raise UsageError(f"expected [NAMESPACE/]NAME, got {ref!r}", field=field)
    return namespace or default_namespace(), name


def api_reader(namespace: str, name: str, records: bool = True) -> Callable[[], Seen]:
    """Reads the Workflow and, label-selected, its nodes and (`records`) its chaos objects, Task pods
    and GPU Jobs' pods, through the official client: in a pod with its ServiceAccount, elsewhere with
    the kubeconfig (UsageError when there is neither). A kind this account may not read is read as
    none (its windows come out unconfirmed), with a warning once."""
    from kubernetes import client

    kube.configure()
    custom, core = client.CustomObjectsApi(), client.CoreV1Api()
    ours = f"{evidence.WORKFLOW}={name}"
    refused: set[str] = set()

    def listed(what: str, call: Callable[..., object], *args: str, **query: str) -> tuple[dict, ...]:
        try:
            found = call(*args, **query)
        except client.ApiException as e:
            if e.status not in (403, 404):
                raise
            if what not in refused:
                refused.add(what)
                log.warning("k8s workflow %s/%s: cannot list %s (%s %s)", namespace, name, what, e.status, e.reason)
            return ()
        plain = found if isinstance(found, dict) else client.ApiClient().sanitize_for_serialization(found)
        return tuple(cast(list[dict], plain["items"]))

    def read() -> Seen:
        try:
            workflow = cast(dict, custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "workflows", name))
        except client.ApiException as e:
            if e.status == 404:
                return Seen(None, [])
            raise
        nodes = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "workflownodes", label_selector=ours)
        if not records:
            return Seen(workflow, cast(dict, nodes)["items"])
        lists = custom.list_namespaced_custom_object
        chaos = tuple(o for p in CHAOS for o in listed(p, lists, GROUP, VERSION, namespace, p, label_selector=ours))
        pods = listed("pods", core.list_namespaced_pod, namespace, label_selector=ours)
        windows = json.loads(workflow["metadata"].get("annotations", {}).get(WINDOWS, "{}")).values()
        jobs = sorted({w["job"].split("/")[0] for w in windows if w.get("job")})
        run = f"{names.RUN}={name}"
        gpu = tuple(o for ns in jobs for o in listed(f"pods in {ns}", core.list_namespaced_pod, ns, label_selector=run))
        return Seen(workflow, cast(dict, nodes)["items"], chaos, pods, gpu)

    return read


class ClusterPhases:
    """The load test's phases from a Workflow, polled every `poll_s` in a thread of its own: a
    `Timeline` (faults/timeline.py) whose phase at a time is settled once the cluster has been read
    past it and every step over it is decided (applied, or unconfirmed). The master and each worker
    read the cluster themselves."""

    def __init__(
        self,
        ref: str,
        read: Callable[[], Seen] | None = None,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ref = ref
        self.clock = clock  # unix time now: when a step is over without a record
        self.namespace, self.name = reference(ref)
        self.read = read or api_reader(self.namespace, self.name)
        self.poll_s = poll_s
        self.t0: float | None = None  # the master's test start, as a worker hears it: not needed here
        self.workflow: dict | None = None
        self.runs: list[StepRun] = []
        self.found: dict[str, Evidence] = {}  # each step's record once read (a chaos object goes at its deadline)
        self.aborted_at: float | None = None  # when a read first saw the Workflow aborted
        self.read_at = -math.inf  # the last read's start: phases are known up to it
        self.closed = False  # the test stopped: what is undecided is unconfirmed
        self.lock = threading.Lock()
        self.poll()
        threading.Thread(target=self._loop, name="llmchaos-k8s-phases", daemon=True).start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.poll_s)
            self.poll()

    def poll(self) -> None:
        """Read the cluster once; a step still on when its Workflow is deleted or aborted ends then."""
        now = self.clock()
        try:
            got = self.read()
        except Exception as e:  # noqa: BLE001 - the API unreachable a moment: the last timeline stands
            log.warning("k8s workflow %s/%s: %s", self.namespace, self.name, str(e).splitlines()[0])
            return
        with self.lock:
            if got.workflow is not None:
                self.workflow = got.workflow
                runs = steps(got.workflow, got.nodes)
                node = {n.get("metadata", {}).get("name"): n for n in got.nodes}
                for r in runs:
                    found = (
                        evidence.of_step(r.kind, node.get(r.node, {}), got, r.job.partition("/")[2]) if r.node else None
                    )
                    known = self.found.get(r.step)
                    if (
                        found is not None
                        and (known is None or known.applied is None)
                        and (found != Evidence() or not known)
                    ):
                        self.found[r.step] = found  # a record once read stands: an applied one is never unsaid
                self.runs = [confirm(r, self.found.get(r.step), now) for r in runs]
                if aborted(got.workflow, got.nodes):  # Chaos Mesh recovers every chaos at once: seen at this read
                    self.aborted_at = self.aborted_at or now
            if got.workflow is None or self.aborted_at is not None:
                # deleted (or not there yet), or aborted: what was on ends then, what was to come never starts
                cut = self.aborted_at or now
                self.runs = [self._cut(r, cut) for r in self.runs if r.start is not None and r.start <= cut]
            self.read_at = max(self.read_at, now)

    def _cut(self, r: StepRun, cut: float) -> StepRun:
        r = self._started(r)
        r = replace(r, end=min(r.end or cut, cut))
        return r if r.applied is not None else replace(r, applied=False, why="no record of an Apply when it ended")

    def _started(self, r: StepRun) -> StepRun:
        """An undecided Task whose container started, from that start: the best record there will be
        when its pod's own comes too late (the test stopped, the Workflow aborted or deleted)."""
        found = self.found.get(r.step)
        if r.applied is not None or found is None or found.started is None:
            return r
        return replace(r, start=found.started, end=found.started + r.duration, applied=True)

    def phase(self, unix_time: float) -> str:
        with self.lock:
            return phase(self.runs, unix_time)

    def settled(self, unix_time: float) -> bool:
        with self.lock:
            if self.closed:
                return True
            undecided = (r for r in self.runs if r.applied is None)
            return unix_time <= self.read_at and not any(r.may_cover(unix_time) for r in undecided)

    def close(self) -> None:
        """The test stopped: a step still undecided is unconfirmed, and every phase is settled."""
        with self.lock:
            self.closed = True
            runs = [self._started(r) for r in self.runs]
            self.runs = [
                r if r.applied is not None or not r.recorded else replace(r, applied=False, why=self._last_word(r))
                for r in runs
            ]

    def _last_word(self, r: StepRun) -> str:
        found = self.found.get(r.step)
        return found.why if found is not None and found.why else "undecided when the test ended"

    def start(self, t0: float) -> FaultClock:
        self.t0 = t0
        return FaultClock(t0, workflow=self.ref)

    def follow(self, clock: FaultClock) -> None:
        self.t0 = clock.t0

    def absorb(self, update: PhaseUpdate) -> None:
        """Nothing: a worker reads the cluster's record itself."""

    def stop(self) -> tuple[list[FaultWindow], list[FaultHost]]:
        """The windows whose steps started, as the cluster ran them (the Workflow runs on without
        us): an unconfirmed one with no actual times, its planned stretch as `unconfirmed` and why in
        `error`; no fault hosts."""
        self.poll()
        self.close()
        now = self.clock()
        wf = self.workflow or {}
        started = wf.get("status", {}).get("startTime") or wf.get("metadata", {}).get("creationTimestamp")
        t0 = stamp(started) if started else now
        windows = []
        for r in sorted(self.runs, key=lambda r: (r.start or 0.0, r.step)):
            if not r.recorded or r.start is None:
                continue
            ended = r.end is not None and r.end <= now
            w = FaultWindow(
                name=r.window,
                kind=r.kind,
                target=r.target,
                params=r.params,
                planned_start=t0 + r.at,
                planned_end=t0 + r.at + r.duration,
            )
            if r.applied:
                w.actual_start, w.actual_end = r.start, r.end if ended else None
                w.error = None if ended else "still on in the cluster when the test ended"
            else:
                w.unconfirmed = [(r.start, r.end if r.end is not None else now)]
                w.error = f"unconfirmed: {r.why}"
            windows.append(w)
        return windows, []

    def active(self) -> list[Active]:
        """(window, kind, target, active now) for each window, for llmchaos_fault_active."""
        now, out = self.clock(), dict[str, Active]()
        with self.lock:
            runs = [(r, self.found.get(r.step)) for r in self.runs]
        for r, found in runs:
            on = out.get(r.window, (r.window, r.kind, json.dumps(r.target, sort_keys=True), False))[3]
            running = r.applied is None and found is not None and found.started is not None  # a Task on, no record yet
            on = on or (r.applied is True and r.covers(now)) or running
            out[r.window] = (r.window, r.kind, json.dumps(r.target, sort_keys=True), on)
        return list(out.values())


_SHARED: dict[str, ClusterPhases] = {}


def shared(ref: str) -> ClusterPhases:
    """One reader per Workflow in a process (a Locust worker reads its options again at each test start)."""
    if ref not in _SHARED:
        _SHARED[ref] = ClusterPhases(ref)
    return _SHARED[ref]


def wait(read: Callable[[], Seen], step: str, until: str, poll_s: float = POLL_S) -> int:
    """Block until `step` is on (`until` start: started, its deadline ahead) or over (end: its
    deadline passed, or the Workflow aborted or deleted): 0 then; 1 when it will never be on (start:
    the Workflow deleted or aborted first, or the step over already). A Workflow not there yet is
    waited for to start; to end, none is there: its steps are over."""
    was_there = False
    while True:
        try:
            got = read()
        except Exception as e:  # noqa: BLE001 - the API unreachable a moment: ask again
            log.warning("k8s wait %s: %s", step, str(e).splitlines()[0])
            time.sleep(poll_s)
            continue
        workflow, nodes = got.workflow, got.nodes
        if workflow is None and (was_there or until == "end"):  # deleted: its steps are over
            return 1 if until == "start" else 0
        was_there = workflow is not None
        if workflow is not None and aborted(workflow, nodes):
            return 1 if until == "start" else 0
        run = next((r for r in steps(workflow, nodes) if r.step == step), None) if workflow else None
        if run is not None and run.recorded and run.start is not None and run.end is not None:
            left = run.end - time.time()
            if left <= 0:
                return 1 if until == "start" else 0
            if until == "start":
                return 0
            time.sleep(min(poll_s, left))
        else:
            time.sleep(poll_s)
