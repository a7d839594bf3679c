"""A whole schedule as one Chaos Mesh Workflow and the objects its steps need.

The entry is a Parallel with one branch per window: a Serial of a Suspend step until the window's
offset and the window's own step (its chaos, a Task, or the Suspend a GPU Job follows), whose
deadline is the window's length. Every branch counts from the Workflow's start, so a late step never
delays the next. Times are whole seconds: Kubernetes records a step's times to the second, and the
phases read back from the cluster are exact only so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from faults.injectors.base import FieldError
from faults.k8s import admission, gpu, kv_link, names, network, pods, replica, sse
from faults.k8s.cluster import API, Cluster, Piece, Step, go_duration
from faults.k8s.refused import CACHE_FLUSH, CORRUPT, ROUTER
from faults.schedule import FaultSpec, Schedule
from llmchaos.errors import UsageError


class Kind(Protocol):
    """How a kind becomes a Workflow's step: a module of these two, or a refusal (refused.py)."""

    def check(self, spec: FaultSpec, cluster: Cluster) -> None: ...

    def piece(self, step: Step, cluster: Cluster) -> Piece: ...


KINDS: dict[str, Kind] = {
    "netem": network,
    "tbf": network,
    "docker": pods,
    "gpu_clock": gpu,
    "sse": sse,
    "corrupt": CORRUPT,  # refused with a line naming target.sim, as gpu_clock's sim target
    "replica": replica,
    "kv_link": kv_link,
    "router": ROUTER,
    "cache_flush": CACHE_FLUSH,  # as corrupt
}
WINDOWS = f"{names.GROUP}/windows"  # the Workflow's annotation: each window step's window, for the phases
MAX_WINDOWS = 200  # a Workflow is one object (etcd keeps them under 1.5 MB) and starts every branch at once
SETUP_ORDER = (
    "Namespace",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Deployment",
    "Service",
    "NetworkPolicy",
)


@dataclass
class Rendered:
    """`setup`: applied first (the proxy must be ready before its first step); `run`: the Workflow and
    the Jobs that follow its steps, applied together."""

    setup: list[dict] = field(default_factory=list)
    run: list[dict] = field(default_factory=list)

    def objects(self) -> list[dict]:
        return self.setup + self.run


def check(plan: Schedule, path: str, cluster: Cluster) -> None:
    """Every window the cluster cannot express, refused in one line naming it (UsageError)."""
    for spec in plan.faults:
        where = f"faults[{spec.index}]"
        reason = names.check(spec.name)
        if reason:
            raise UsageError(reason, file=path, line=spec.line, field=f"{where}.name")
        for key in ("at", "duration", "every"):
            value = getattr(spec, key)
            if value is not None and value != round(value):
                raise UsageError(
                    f"{value:g}s: on a cluster windows are whole seconds (Kubernetes records times so)",
                    file=path,
                    line=spec.line,
                    field=f"{where}.{key}",
                )
        try:
            KINDS[spec.kind].check(spec, cluster)
        except FieldError as e:
            root = e.field.split(".")[0]
            line = spec.target_line if root == "target" else spec.lines.get(root, spec.params_line)
            raise UsageError(f"{spec.name}: {e}", file=path, line=line, field=f"{where}.{e.field}") from None


def steps(plan: Schedule, horizon: float) -> Iterator[tuple[FaultSpec, Step]]:
    """Each window and its step's name: the window's, with the repeat's number if it repeats."""
    by_name = {f.name: f for f in plan.faults}
    seen: dict[str, int] = {}
    for w in plan.windows(horizon):
        k = seen[w.name] = seen.get(w.name, -1) + 1
        spec = by_name[w.name]
        yield spec, Step(w, f"{w.name}-{k}" if spec.every else w.name)


def render(plan: Schedule, path: str, cluster: Cluster, horizon: float) -> Rendered:
    check(plan, path, cluster)
    if plan.count(horizon) > MAX_WINDOWS:
        raise UsageError(f"{plan.count(horizon)} windows, over the {MAX_WINDOWS} one Workflow takes", file=path)
    templates: list[dict] = []
    branches: list[str] = []
    windows: dict[str, dict] = {}
    setup: dict[tuple[str, str, str], dict] = {}  # (kind, namespace, name): an object once
    files: dict[str, str] = {}
    beside: list[dict] = []
    taken = {cluster.run}  # the entry's
    for spec, step in steps(plan, horizon):
        w = step.window
        for name in (step.name, f"{step.name}-wait", f"{step.name}-seq", f"{cluster.run}-{step.name}"):
            reason = names.check(name) or (f"step {name!r} is another window's" if name in taken else None)
            if reason:
                raise UsageError(f"{spec.name}: {reason}", file=path, line=spec.line, field=f"faults[{spec.index}]")
        taken |= {step.name, f"{step.name}-wait", f"{step.name}-seq"}
        piece: Piece = KINDS[w.kind].piece(step, cluster)
        for obj in piece.setup:
            setup.setdefault((obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]), obj)
        files |= piece.files
        beside += piece.beside
        windows[step.name] = {
            "window": w.name,
            "kind": w.kind,
            "target": w.target,
            "params": w.params,
            "at": w.start,
            "duration": w.end - w.start,
        }
        for job in (o for o in piece.beside if o["kind"] == "Job"):  # a GPU window's: where its record is
            windows[step.name]["job"] = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        if w.start > 0:
            wait = {"name": f"{step.name}-wait", "templateType": "Suspend", "deadline": go_duration(w.start)}
            templates += [{"name": f"{step.name}-seq", "templateType": "Serial", "children": [wait["name"], step.name]}]
            templates.append(wait)
            branches.append(f"{step.name}-seq")
        else:
            branches.append(step.name)
        templates.append(piece.template)
    if files:
        name = sse.windows_configmap(cluster)
        setup[("ConfigMap", cluster.namespace, name)] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": cluster.meta(name),
            "data": files,
        }
    entry: dict = {"name": cluster.run, "templateType": "Parallel", "children": branches}
    meta = cluster.meta(cluster.run) | {"annotations": {WINDOWS: json.dumps(windows, sort_keys=True)}}
    flow = {"entry": entry["name"], "templates": [entry, *templates]}
    ordered = sorted(setup.values(), key=lambda o: (SETUP_ORDER.index(o["kind"]), o["metadata"]["name"]))
    out = Rendered(ordered, [{"apiVersion": API, "kind": "Workflow", "metadata": meta, "spec": flow}, *beside])
    for obj in out.objects():  # the names made from the run's
        reason = names.check(obj["metadata"]["name"], names.DNS_1035)
        if reason:
            raise UsageError(f"{obj['kind']} {reason}", field="--run")
    for obj in out.objects():  # what the cluster would refuse at apply: nothing written
        refused = admission.refusal(obj)
        if refused:
            raise UsageError(f"{obj['kind']} {obj['metadata']['name']}: {refused}", file=path)
    return out
