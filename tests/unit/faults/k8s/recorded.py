"""WorkflowNodes as Chaos Mesh records them while it runs a Workflow, written from the WorkflowNode
CRD's spec and status schemas: each template's node with its start and deadline (to the second, as
Kubernetes keeps times) and its conditions. A Parallel starts its children with itself, a Serial each
child when the one before ended; a Suspend or a chaos ends at its deadline, a Task when its container
exits (here: after the window it holds). `late` delays a template's start by that many seconds."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from faults.k8s.workflow import WINDOWS

EMBEDDED = {"NetworkChaos": "networkChaos", "PodChaos": "podChaos", "StressChaos": "stressChaos"}


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds(deadline: str) -> int:
    assert deadline.endswith("s")
    return int(deadline[:-1])


def nodes(workflow: dict, t0: int, until: float = float("inf"), late: dict[str, int] | None = None) -> list[dict]:
    """The nodes of `workflow` started at unix time `t0`, as recorded at `until` (those not started
    yet absent, those still running with no condition)."""
    templates = {t["name"]: t for t in workflow["spec"]["templates"]}
    windows = json.loads(workflow["metadata"]["annotations"][WINDOWS])
    out: list[dict] = []

    def run(name: str, start: int) -> int:
        """Record `name`'s node from `start`; when it ends."""
        t = templates[name]
        start += (late or {}).get(name, 0)
        kind = t["templateType"]
        if kind == "Parallel":
            end = max(run(child, start) for child in t["children"])
        elif kind == "Serial":
            end = start
            for child in t["children"]:
                end = run(child, end)
        elif kind == "Task":
            end = start + int(windows[name]["duration"])
        else:
            end = start + seconds(t["deadline"])
        if start > until:
            return end
        spec = {
            "templateName": name,
            "workflowName": workflow["metadata"]["name"],
            "type": kind,
            "startTime": iso(start),
        }
        if "deadline" in t:
            spec["deadline"] = iso(start + seconds(t["deadline"]))
        for key in ("children", "task"):
            if key in t:
                spec[key] = t[key]
        if kind in EMBEDDED:
            spec[EMBEDDED[kind]] = t[EMBEDDED[kind]]
        status: dict = {}
        if end <= until:
            exceeded = kind not in ("Parallel", "Serial", "Task")
            status["conditions"] = [
                {"type": "DeadlineExceed" if exceeded else "Accomplished", "status": "True", "reason": ""}
            ]
        if kind in EMBEDDED:
            status["chaosResource"] = {"apiGroup": "chaos-mesh.org", "kind": kind, "name": f"{name}-x7k2p"}
        out.append(
            {
                "apiVersion": "chaos-mesh.org/v1alpha1",
                "kind": "WorkflowNode",
                "metadata": {
                    "name": f"{name}-x7k2p",
                    "namespace": workflow["metadata"]["namespace"],
                    "labels": {"chaos-mesh.org/workflow": workflow["metadata"]["name"]},
                },
                "spec": spec,
                "status": status,
            }
        )
        return end

    run(workflow["spec"]["entry"], t0)
    return out
