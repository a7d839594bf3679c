"""A fake Chaos Mesh controller, as of any moment, for a rendered Workflow started at `t0`: what the
API would hold then, following the real reconcilers (pkg/workflow/controllers):

- the WorkflowNodes (tests/unit/faults/k8s/recorded.py): a Serial starts its next child when the
  last ends, a chaos or Suspend node ends at its deadline (DeadlineExceed);
- each chaos node's chaos object, created at the node's start (labelled `controlled-by` the node),
  its fault applied `lag` seconds later (an Apply event that succeeded), deleted at the deadline;
- each Task node's pod, its container started `lag` seconds after the node, its window set `lag`
  seconds later (`faults run`'s start) and cleared a window after that, when the container ends with
  the window as it ran for its termination message (reported a second later);
- each GPU window's Job pod (applied with the Workflow), locking `lag` seconds into its step and
  resetting `lag` seconds past its deadline, then ended with that record as its termination message;
- an abort (`abort(at)`): the annotation, the Aborted condition on every node, the chaos objects gone.

`fail` plays a step's failure: `nothing-selected` (its chaos object's Selected condition False, no
record), `apply-failed` (an Apply that failed), `webhook` (its chaos object refused at creation:
none), `pending` (its Task pod never starts), `unscheduled` (its GPU Job's pod never scheduled)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from faults.k8s.evidence import CONTROLLED_BY, JOB_NAME, WORKFLOW, Seen, stamp
from faults.k8s.names import RUN
from faults.k8s.phases import ABORT
from faults.k8s.workflow import WINDOWS
from tests.unit.faults.k8s.recorded import EMBEDDED, iso, nodes

UNSCHEDULABLE = "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."
FAILURES = ("nothing-selected", "apply-failed", "webhook", "pending", "unscheduled")


@dataclass
class ChaosMesh:
    workflow: dict
    t0: int
    fail: dict[str, str] = field(default_factory=dict)  # step -> one of FAILURES
    lag: int = 1
    aborted: int | None = None

    def abort(self, at: int) -> None:
        self.aborted = at
        self.workflow["metadata"].setdefault("annotations", {})[ABORT] = "true"

    def nodes(self, now: float) -> list[dict]:
        out = nodes(self.workflow, self.t0, until=now)
        for node in out:
            kind = node["spec"]["type"]
            if kind in EMBEDDED and self.fail.get(node["spec"]["templateName"]) == "webhook":
                node["status"].pop("chaosResource", None)  # its object never made
            if self.aborted is not None and now >= self.aborted:
                node["status"].setdefault("conditions", []).append(
                    {"type": "Aborted", "status": "True", "reason": "WorkflowAborted"}
                )
        return out

    def objects(self, now: float) -> list[dict]:
        """The chaos objects and pods there are at `now`."""
        out: list[dict] = []
        windows = json.loads(self.workflow["metadata"]["annotations"][WINDOWS])
        ended = min(now, self.aborted) if self.aborted is not None else now
        for node in nodes(self.workflow, self.t0, until=ended):
            step, kind = node["spec"]["templateName"], node["spec"]["type"]
            start = _unix(node["spec"]["startTime"])
            if kind in EMBEDDED and step in windows:
                deadline = _unix(node["spec"]["deadline"])
                if now < deadline and self.fail.get(step) != "webhook" and not (self.aborted and now >= self.aborted):
                    out.append(self._chaos(node, kind, start, now))
            elif kind == "Task":
                out.append(self._task(node, start, windows[step]["duration"], now))
        for step, w in windows.items():
            if w.get("job"):
                out.append(self._gpu_job(step, w["job"], now))
        return out

    def _meta(self, name: str, node: dict) -> dict:
        labels = {CONTROLLED_BY: node["metadata"]["name"], WORKFLOW: self.workflow["metadata"]["name"]}
        return {"name": name, "namespace": self.workflow["metadata"]["namespace"], "labels": labels}

    def _chaos(self, node: dict, kind: str, start: int, now: float) -> dict:
        fail = self.fail.get(node["spec"]["templateName"])
        status: dict = {
            "conditions": [{"type": "Selected", "status": "False" if fail == "nothing-selected" else "True"}]
        }
        if fail != "nothing-selected" and now >= start + self.lag:
            event = {"operation": "Apply", "timestamp": iso(start + self.lag)}
            event |= (
                {"type": "Failed", "message": "connection refused"} if fail == "apply-failed" else {"type": "Succeeded"}
            )
            record = {"id": "staging/llm-0", "selectorKey": ".", "phase": "Injected", "events": [event]}
            status["experiment"] = {"containerRecords": [record]}
        spec = node["spec"][EMBEDDED[kind]]
        meta = self._meta(node["status"]["chaosResource"]["name"], node)
        return {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": kind, "metadata": meta, "spec": spec, "status": status}

    def _task(self, node: dict, start: int, duration: float, now: float) -> dict:
        status: dict = {"phase": "Pending"}
        began = start + self.lag
        if self.fail.get(node["spec"]["templateName"]) != "pending" and now >= began:
            applied = began + self.lag
            done = applied + duration
            window = {"name": node["spec"]["templateName"], "actual_start": applied, "actual_end": done, "error": None}
            state = (
                {
                    "terminated": {
                        "startedAt": iso(began),
                        "finishedAt": iso(done),
                        "exitCode": 0,
                        "reason": "Completed",
                        "message": json.dumps([window], indent=1),
                    }
                }
                if now >= done + 1
                else {"running": {"startedAt": iso(began)}}
            )
            status = {
                "phase": "Succeeded" if now >= done + 1 else "Running",
                "containerStatuses": [{"name": "fault", "state": state}],
            }
        meta = self._meta(f"{node['metadata']['name']}-t5d8x", node)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": _containers("fault"), "status": status}

    def _gpu_job(self, step: str, job: str, now: float) -> dict:
        namespace, name = job.split("/")
        run = self.workflow["metadata"]["name"]
        meta = {"name": f"{name}-g7q2w", "namespace": namespace, "labels": {JOB_NAME: name, RUN: run}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": _containers("lock")}
        if self.fail.get(step) == "unscheduled":
            reason = {
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 node(s) didn't match pod affinity rules.",
            }
            pod["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", **reason}]}
            return pod
        node = next((n for n in nodes(self.workflow, self.t0, until=now) if n["spec"]["templateName"] == step), None)
        record = "gpu GPU-aaaa\n"
        if node is not None and now >= _unix(node["spec"]["startTime"]) + self.lag:
            record += f"locked {_unix(node['spec']['startTime']) + self.lag}\n"
            reset = _unix(node["spec"]["deadline"]) + self.lag
            if self.aborted is not None:
                reset = min(reset, self.aborted + self.lag)
            if now >= reset + 1:  # its pod ended, and the kubelet reported it
                state = {"terminated": {"exitCode": 0, "reason": "Completed", "message": record + f"reset {reset}\n"}}
                pod["status"] = {"phase": "Succeeded", "containerStatuses": [{"name": "lock", "state": state}]}
                return pod
        pod["status"] = {"phase": "Running", "containerStatuses": [{"name": "lock", "state": {"running": {}}}]}
        return pod

    def seen(self, now: float) -> Seen:
        """One read of it all at `now`, as phases.api_reader reads it."""
        objects = self.objects(now)
        pods = [o for o in objects if o["kind"] == "Pod"]
        return Seen(
            self.workflow,
            self.nodes(now),
            tuple(o for o in objects if o["kind"] != "Pod"),
            tuple(p for p in pods if JOB_NAME not in p["metadata"]["labels"]),
            tuple(p for p in pods if JOB_NAME in p["metadata"]["labels"]),
        )


def _unix(text: str) -> int:
    return int(stamp(text))


def _containers(name: str) -> dict:
    return {"containers": [{"name": name, "image": "llmchaos:0.1.0"}]}
