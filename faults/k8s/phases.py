"""The phases of a run from the cluster: when each window's step of a Chaos Mesh Workflow really
started and ended, as its WorkflowNodes record them, read through the Kubernetes API.

A step starts at its node's `startTime` and ends at its node's `deadline` (Chaos Mesh recovers a chaos
and ends a Suspend there); a Task step (an SSE window) holds its fault for the window's length from
its start. Before its node exists, a step is expected when the Suspend before it ends (that node's
`deadline`), else at the Workflow's start plus its offset: so a request is labelled on time without
waiting for the next read, and by the record once there is one. A request is labelled as on one
host: the windows its start falls in, sorted and joined by '+', else `baseline`. `ClusterPhases`
keeps that timeline fresh for the load test (`--k8s-workflow`)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import cast

from faults.k8s.cluster import API
from faults.k8s.workflow import WINDOWS
from faults.timeline import Active, FaultClock, PhaseUpdate
from llmchaos.errors import UsageError
from llmchaos.run import FaultHost, FaultWindow

log = logging.getLogger("llmchaos.faults")

GROUP, VERSION = API.split("/")
POLL_S = 1.0
ABORT = "workflow.chaos-mesh.org/abort"  # Chaos Mesh's annotation: "true" aborts a Workflow
SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
Snapshot = tuple[dict | None, list[dict]]  # the Workflow (None: there is none) and its namespace's WorkflowNodes


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
    recorded: bool = False  # its own node has started: the times are the cluster's record

    def covers(self, t: float) -> bool:
        return self.start is not None and self.start <= t < (self.end if self.end is not None else float("inf"))


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def steps(workflow: dict, nodes: list[dict]) -> list[StepRun]:
    """Every window step of `workflow`, with its start and end where they are known."""
    windows = json.loads(workflow["metadata"].get("annotations", {}).get(WINDOWS, "{}"))
    ran: dict[str, dict] = {}
    for node in nodes:
        spec = node.get("spec", {})
        if spec.get("workflowName") == workflow["metadata"]["name"] and "startTime" in spec:
            ran[spec.get("templateName", "")] = spec
    began = workflow.get("status", {}).get("startTime") or workflow["metadata"].get("creationTimestamp")
    out = []
    for step, w in windows.items():
        run = StepRun(step, w["window"], w["kind"], w["target"], w["params"], w["at"], w["duration"])
        own, wait = ran.get(step), ran.get(f"{step}-wait", {})
        if own is not None:
            start = stamp(own["startTime"])
            end = stamp(own["deadline"]) if "deadline" in own and w["kind"] != "sse" else start + w["duration"]
            run = replace(run, start=start, end=end, recorded=True)
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


def phase(runs: list[StepRun], t: float) -> str:
    """The phase of a request that started at unix time `t`."""
    return "+".join(sorted({r.window for r in runs if r.covers(t)})) or "baseline"


def default_namespace() -> str:
    """The pod's own namespace, else the kubeconfig context's, else `default`."""
    try:
        return Path(SA_NAMESPACE).read_text().strip()
    except OSError:
        pass
    from kubernetes import config

    try:
        return str(config.list_kube_config_contexts()[1]["context"].get("namespace", "default"))
    except Exception:  # noqa: BLE001 - no kubeconfig, or one without contexts: the API's default
        return "default"


def reference(ref: str) -> tuple[str, str]:
    """(namespace, name) from `[NAMESPACE/]NAME`."""
    namespace, _, name = ref.rpartition("/")
    if not name:
        raise UsageError(f"expected [NAMESPACE/]NAME, got {ref!r}", field="--k8s-workflow")
    return namespace or default_namespace(), name


def api_reader(namespace: str, name: str) -> Callable[[], Snapshot]:
    """Reads the Workflow and the WorkflowNodes through the official client: in a pod with its
    ServiceAccount, elsewhere with the kubeconfig (UsageError when there is neither)."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config()
        except (config.ConfigException, OSError) as e:
            raise UsageError(f"no cluster to read: not in a pod, and no kubeconfig ({e})") from None
    api = client.CustomObjectsApi()

    def read() -> Snapshot:
        try:
            workflow = cast(dict, api.get_namespaced_custom_object(GROUP, VERSION, namespace, "workflows", name))
        except client.ApiException as e:
            if e.status == 404:
                return None, []
            raise
        found = cast(dict, api.list_namespaced_custom_object(GROUP, VERSION, namespace, "workflownodes"))
        return workflow, found["items"]

    return read


class ClusterPhases:
    """The load test's phases from a Workflow, polled every `poll_s` in a thread of its own: a
    `Timeline` (faults/timeline.py) whose every phase is settled (the cluster's record, or what it
    is expected to do until there is one). The master and each worker read the cluster themselves."""

    def __init__(self, ref: str, read: Callable[[], Snapshot] | None = None, poll_s: float = POLL_S) -> None:
        self.ref = ref
        self.namespace, self.name = reference(ref)
        self.read = read or api_reader(self.namespace, self.name)
        self.poll_s = poll_s
        self.t0: float | None = None  # the master's test start, as a worker hears it: not needed here
        self.workflow: dict | None = None
        self.runs: list[StepRun] = []
        self.aborted_at: float | None = None  # when a read first saw the Workflow aborted
        self.poll()
        threading.Thread(target=self._loop, name="llmchaos-k8s-phases", daemon=True).start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.poll_s)
            self.poll()

    def poll(self) -> None:
        """Read the cluster once; a step still on when its Workflow is deleted ends now."""
        try:
            workflow, nodes = self.read()
        except Exception as e:  # noqa: BLE001 - the API unreachable a moment: the last timeline stands
            log.warning("k8s workflow %s/%s: %s", self.namespace, self.name, str(e).splitlines()[0])
            return
        now = time.time()
        if workflow is not None:
            self.workflow, self.runs = workflow, steps(workflow, nodes)
            if aborted(workflow, nodes):  # Chaos Mesh recovers every chaos at once: seen at this read
                self.aborted_at = self.aborted_at or now
        if workflow is None or self.aborted_at is not None:
            # deleted (or not there yet), or aborted: what was on ends then, what was expected never comes
            cut = self.aborted_at or now
            self.runs = [
                replace(r, end=min(r.end or cut, cut)) for r in self.runs if r.start is not None and r.start <= cut
            ]

    def phase(self, unix_time: float) -> str:
        return phase(self.runs, unix_time)

    def settled(self, unix_time: float) -> bool:
        return True

    def start(self, t0: float) -> FaultClock:
        self.t0 = t0
        return FaultClock(t0, workflow=self.ref)

    def follow(self, clock: FaultClock) -> None:
        self.t0 = clock.t0

    def absorb(self, update: PhaseUpdate) -> None:
        """Nothing: a worker reads the cluster's record itself."""

    def stop(self) -> tuple[list[FaultWindow], list[FaultHost]]:
        """The windows that started, as the cluster ran them (the Workflow runs on without us); no
        fault hosts."""
        self.poll()
        now = time.time()
        wf = self.workflow or {}
        started = wf.get("status", {}).get("startTime") or wf.get("metadata", {}).get("creationTimestamp")
        t0 = stamp(started) if started else now
        windows = [
            FaultWindow(
                name=r.window,
                kind=r.kind,
                target=r.target,
                params=r.params,
                planned_start=t0 + r.at,
                planned_end=t0 + r.at + r.duration,
                actual_start=r.start,
                actual_end=r.end if r.end is not None and r.end <= now else None,
                error=None if r.end is not None and r.end <= now else "still on in the cluster when the test ended",
            )
            for r in sorted(self.runs, key=lambda r: (r.start or 0.0, r.step))
            if r.recorded
        ]
        return windows, []

    def active(self) -> list[Active]:
        """(window, kind, target, active now) for each window, for llmchaos_fault_active."""
        now, out = time.time(), dict[str, Active]()
        for r in self.runs:
            on = out.get(r.window, (r.window, r.kind, json.dumps(r.target, sort_keys=True), False))[3] or r.covers(now)
            out[r.window] = (r.window, r.kind, json.dumps(r.target, sort_keys=True), on)
        return list(out.values())


_SHARED: dict[str, ClusterPhases] = {}


def shared(ref: str) -> ClusterPhases:
    """One reader per Workflow in a process (a Locust worker reads its options again at each test start)."""
    if ref not in _SHARED:
        _SHARED[ref] = ClusterPhases(ref)
    return _SHARED[ref]


def wait(read: Callable[[], Snapshot], step: str, until: str, poll_s: float = POLL_S) -> int:
    """Block until `step` is on (`until` start: started, its deadline ahead) or over (end: its
    deadline passed, or the Workflow aborted or deleted): 0 then; 1 when it will never be on (start:
    the Workflow deleted or aborted first, or the step over already). A Workflow not there yet is
    waited for to start; to end, none is there: its steps are over."""
    seen = False
    while True:
        try:
            workflow, nodes = read()
        except Exception as e:  # noqa: BLE001 - the API unreachable a moment: ask again
            log.warning("k8s wait %s: %s", step, str(e).splitlines()[0])
            time.sleep(poll_s)
            continue
        if workflow is None and (seen or until == "end"):  # deleted: its steps are over
            return 1 if until == "start" else 0
        seen = workflow is not None
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
