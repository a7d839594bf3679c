"""What the cluster's own objects say a window step did, beyond its WorkflowNode's planned times:
whether its fault was applied, and when it was applied and recovered.

- A chaos step (NetworkChaos, PodChaos): the chaos object its node created (labelled
  `chaos-mesh.org/controlled-by: NODE`), its `status.experiment.containerRecords[].events`: the first
  Apply that succeeded, the last Recover; a Selected condition that is False (its selector matched no
  pod) or an Apply that only failed says why it never applied. A node with no chaos object was
  refused its object (a webhook) or not reached yet.
- A Task step (an SSE window): its pod (the same label), and once it has ended the window as `faults
  run` ran it (its timeline, the container's termination message): set and cleared when the proxy
  said so, not when the container started (the interpreter's start and the run's lead come first).
  A pod that never started (Pending), or one that ended with no record, applied nothing we know of.
- A GPU window's Suspend step: its Job's pod (`job-name: RUN-STEP`, in the GPU namespace), the lock
  and reset times of its termination message (faults/k8s/gpu.py), once it has ended; never scheduled,
  or ended without a lock, it applied nothing."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime

CONTROLLED_BY = "chaos-mesh.org/controlled-by"
WORKFLOW = "chaos-mesh.org/workflow"
JOB_NAME = "job-name"


@dataclass(frozen=True)
class Evidence:
    applied: float | None = None  # unix times, as the cluster recorded them
    recovered: float | None = None
    why: str | None = None  # why it applied nothing, where the cluster says
    started: float | None = None  # a Task's container started (its record comes when it ends)


@dataclass(frozen=True)
class Seen:
    """One read of the cluster: the Workflow (None: there is none), its nodes, the chaos objects and
    the pods (Task pods) labelled with it, and the pods of its GPU Jobs."""

    workflow: dict | None
    nodes: list[dict]
    chaos: tuple[dict, ...] = ()
    pods: tuple[dict, ...] = ()
    gpu_pods: tuple[dict, ...] = ()


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _stamp(value: object) -> float | None:
    """A record's RFC 3339 time; None when it is none (a record this reader cannot read counts as no
    record, never as a time)."""
    try:
        return stamp(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _seconds(value: object) -> float | None:
    """The GPU Job's unix seconds; None when they are none (or NaN, or infinite)."""
    try:
        t = float(str(value))
    except ValueError:
        return None
    return t if math.isfinite(t) else None


def _labelled(objects: tuple[dict, ...], key: str, value: str) -> dict | None:
    return next((o for o in objects if (o.get("metadata", {}).get("labels") or {}).get(key) == value), None)


def chaos(obj: dict | None) -> Evidence | None:
    """A chaos object's record; None when there is none yet."""
    if obj is None:
        return None
    status = obj.get("status") or {}
    records = (status.get("experiment") or {}).get("containerRecords") or []
    events = [
        (e.get("operation"), e.get("type"), t, e.get("message") or "")
        for r in records
        for e in r.get("events") or []
        if (t := _stamp(e.get("timestamp"))) is not None
    ]
    applied = [t for op, kind, t, _ in events if (op, kind) == ("Apply", "Succeeded")]
    recovered = [t for op, kind, t, _ in events if (op, kind) == ("Recover", "Succeeded")]
    if applied:
        return Evidence(min(applied), max(recovered) if recovered else None)
    failed = [message for op, kind, _, message in events if (op, kind) == ("Apply", "Failed")]
    if failed:
        return Evidence(why=f"Apply failed: {failed[-1]}")
    selected = next((c for c in status.get("conditions") or [] if c.get("type") == "Selected"), None)
    if selected is not None and selected.get("status") == "False":
        return Evidence(why=f"selected no pod{': ' + selected['reason'] if selected.get('reason') else ''}")
    return Evidence()


def task(pod: dict | None) -> Evidence | None:
    """A Task pod: its window's record once it has ended, its container's start meanwhile; None when
    there is no pod yet."""
    if pod is None:
        return None
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    state = (statuses[0].get("state") or {}) if statuses else {}
    ended = state.get("terminated")
    started = _stamp((state.get("running") or ended or {}).get("startedAt"))
    if ended:
        return _ran(ended, started)
    if started is not None:
        return Evidence(started=started)
    return Evidence(why=f"its pod is {(pod.get('status') or {}).get('phase', 'Pending')}")


def _ran(ended: dict, started: float | None) -> Evidence:
    """The window `faults run --timeline /dev/termination-log` wrote as its container ended."""
    try:
        (window,) = json.loads(str(ended.get("message") or ""))
        applied, reverted = _seconds(window.get("actual_start")), _seconds(window.get("actual_end"))
        error = window.get("error")
    except (ValueError, TypeError, AttributeError):  # no record, or not one window's
        return Evidence(
            why=f"its pod ended with no record of its window (exit {ended.get('exitCode')}: {ended.get('reason')})",
            started=started,
        )
    if applied is None:
        return Evidence(why=f"its window never started: {error or 'no start in its record'}", started=started)
    return Evidence(applied, reverted, started=started)


def gpu_job(pod: dict | None) -> Evidence | None:
    """A GPU Job's pod: its termination message's lock and reset, once it has ended."""
    if pod is None:
        return None
    status = pod.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return Evidence(why=f"the GPU Job was not scheduled: {c.get('reason', '')} {c.get('message', '')}".strip())
    statuses = status.get("containerStatuses") or []
    ended = (statuses[0].get("state") or {}).get("terminated") if statuses else None
    if not ended:
        return Evidence()
    said = dict(line.split(" ", 1) for line in str(ended.get("message") or "").splitlines() if " " in line)
    locked = _seconds(said.get("locked"))
    if locked is None:
        return Evidence(why=f"the GPU Job ended without a lock (exit {ended.get('exitCode')}: {ended.get('reason')})")
    return Evidence(locked, _seconds(said.get("reset")))


def of_step(kind: str, node: dict, seen: Seen, job: str) -> Evidence | None:
    """What the cluster says of the step whose node is `node` (its Job `job`, a GPU window's)."""
    name = node.get("metadata", {}).get("name", "")
    if kind == "gpu_clock":
        return gpu_job(_labelled(seen.gpu_pods, JOB_NAME, job))
    if kind == "sse":
        return task(_labelled(seen.pods, CONTROLLED_BY, name))
    return chaos(_labelled(seen.chaos, CONTROLLED_BY, name))
