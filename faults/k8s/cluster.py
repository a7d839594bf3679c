"""The cluster a schedule is rendered for (the command line's options), and what every window's step
brings to the rendering: its Workflow template and the objects it needs."""

from __future__ import annotations

from dataclasses import dataclass, field

from faults.injectors.base import FieldError
from faults.k8s import names
from faults.schedule import Window

API = "chaos-mesh.org/v1alpha1"


@dataclass(frozen=True)
class Cluster:
    run: str  # the Workflow's name, and every other object's first part
    namespace: str = "default"
    selector: dict[str, str] = field(default_factory=dict)  # the server's pods
    replicas: dict[str, str] = field(default_factory=dict)  # a router's replicas: one StatefulSet's pods
    prefill: dict[str, str] = field(default_factory=dict)  # a disaggregated cluster's prefill pods
    decode: dict[str, str] = field(default_factory=dict)  # and its decode pods
    gpu_namespace: str = "llmchaos-gpu"  # the GPU Jobs' own, Pod Security privileged
    gpu_access: str = "driver-root"  # or runtime-class (gpu.py)
    driver_root: str = "auto"  # on the node: auto, or the path of the driver's root
    upstream: str = ""  # the model's Service, behind the SSE proxy
    image: str = "llmchaos:0.1.0"  # compose/Dockerfile's

    def server_pods(self, kind: str) -> dict:
        """A Chaos Mesh selector for the server's pods (FieldError when there is no --selector)."""
        return self.pods(self.selector, f"{kind} acts on the server's pods", "--selector", "app=llm")

    def pods(self, labels: dict[str, str], why: str, option: str, example: str) -> dict:
        """A Chaos Mesh selector for the pods that carry `labels` (FieldError naming `option` when
        there are none: the option was not given)."""
        if not labels:
            raise FieldError("target", f"{why}: give {option} (e.g. {example})")
        return {"namespaces": [self.namespace], "labelSelectors": dict(labels)}

    def meta(self, name: str, window: str | None = None) -> dict:
        return names.meta(name, self.namespace, self.run, window)


@dataclass(frozen=True)
class Step:
    """One window's action step: the window (times from the Workflow's start) and its template's name."""

    window: Window
    name: str


@dataclass
class Piece:
    """What a step brings: its template, the objects applied before the Workflow (`setup`, the same
    object from several steps once), those applied with it (`beside`), and files for the windows'
    ConfigMap."""

    template: dict
    setup: list[dict] = field(default_factory=list)
    beside: list[dict] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def go_duration(seconds: float) -> str:
    """A whole number of seconds as Chaos Mesh and Kubernetes read durations (`90s`)."""
    return f"{round(seconds)}s"


CHAOS = ["networkchaos", "podchaos"]  # what a window's chaos step makes, whose records say it applied


def reader_role(meta: dict, subject: dict | None = None, pods: bool = False, chaos: bool = False) -> list[dict]:
    """A Role that reads Workflows and their steps (and pods: `pods`; the steps' chaos objects:
    `chaos`) and nothing else, bound to the ServiceAccount named as the Role in its namespace, or
    `subject` (a ServiceAccount's metadata, maybe of another namespace): what `llmchaos k8s wait`,
    `k8s gpu` and the load test's phases need."""
    group = API.split("/")[0]
    account = subject or meta
    read = ["workflows", "workflownodes"] + (CHAOS if chaos else [])
    rules = [{"apiGroups": [group], "resources": read, "verbs": ["get", "list"]}]
    rules += [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}] if pods else []
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": meta["name"]},
            "subjects": [{"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}],
        },
    ]
