"""`sse` windows: our SSE chaos proxy as a Deployment and Service in front of the model's Service
(--upstream), its control API on a port of its own that a NetworkPolicy opens to this namespace's
pods alone, and for each window a Task step that runs the window through that API
(`llmchaos faults run` on a one-window schedule: it sets the fault, holds it for the window and
clears it, also on SIGTERM, as when the Workflow is deleted, and leaves the window as it ran in its
termination message).

A target `{proxy: HOST:PORT}` keeps its port: the proxy listens there and its Service serves it."""

from __future__ import annotations

import yaml

from faults.injectors.base import FieldError
from faults.k8s.cluster import Cluster, Piece, Step, go_duration
from faults.k8s.podsecurity import HOME, container_context
from faults.proxy.wire import CONTROL
from faults.schedule import FaultSpec

CONTROL_PORT = 9199
TERMINATION_LOG = "/dev/termination-log"  # the kubelet's default terminationMessagePath, writable by any user
TASK_GRACE_S = 120  # the step's deadline past its window: the pod's start, the image's pull
MOUNT = "/etc/llmchaos/windows"
TASK_RESOURCES = {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
PROXY_RESOURCES = {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}


def _port(target: dict) -> int:
    port = str(target["proxy"]).rpartition(":")[2]
    if not port.isdigit() or not 1 <= int(port) <= 65535 or int(port) == CONTROL_PORT:
        raise FieldError(
            "target.proxy", f"expected HOST:PORT with a port other than {CONTROL_PORT} (the control API's)"
        )
    return int(port)


def check(spec: FaultSpec, cluster: Cluster) -> None:
    _port(spec.target)
    if not cluster.upstream:
        raise FieldError("target", "the proxy goes in front of the model's Service: give --upstream URL")


def windows_configmap(cluster: Cluster) -> str:
    return f"{cluster.run}-windows"


def piece(step: Step, cluster: Cluster) -> Piece:
    w, port = step.window, _port(step.window.target)
    name = f"{cluster.run}-proxy-{port}"
    one = {
        "faults": [
            {
                "name": w.name,
                "kind": "sse",
                "target": {"proxy": f"{name}:{CONTROL_PORT}"},
                "at": "0s",
                "duration": go_duration(w.end - w.start),
                "params": w.params,
            }
        ]
    }
    task = {
        "container": {
            "name": "fault",
            "image": cluster.image,
            # the window as it ran, for the reader (faults/k8s/evidence.py): its termination message
            "command": ["llmchaos", "faults", "run", f"{MOUNT}/{w.name}.yaml", "--timeline", TERMINATION_LOG],
            "volumeMounts": [{"name": "windows", "mountPath": MOUNT, "readOnly": True}],
            "env": [HOME],  # faults run's journal goes under it
            "securityContext": container_context(),
            "resources": TASK_RESOURCES,
        },
        "volumes": [{"name": "windows", "configMap": {"name": windows_configmap(cluster)}}],
    }
    template = {
        "name": step.name,
        "templateType": "Task",
        "deadline": go_duration(w.end - w.start + TASK_GRACE_S),
        "task": task,
    }
    return Piece(template, setup=proxy(name, port, cluster), files={f"{w.name}.yaml": yaml.safe_dump(one)})


def proxy(name: str, port: int, cluster: Cluster) -> list[dict]:
    """The proxy's Deployment (one replica: the fault is one process's state), Service and NetworkPolicy."""
    pods = {"app.kubernetes.io/name": "llmchaos-proxy", "app.kubernetes.io/instance": name}
    command = ["llmchaos", "proxy", "--listen", f"0.0.0.0:{port}", "--upstream", cluster.upstream]
    container = {
        "name": "proxy",
        "image": cluster.image,
        "command": [*command, "--control-listen", f"0.0.0.0:{CONTROL_PORT}"],
        "ports": [
            {"name": "sse", "containerPort": port},
            {"name": "control", "containerPort": CONTROL_PORT},
        ],
        "readinessProbe": {"httpGet": {"path": CONTROL, "port": "control"}, "periodSeconds": 5},
        "securityContext": container_context(),
        "resources": PROXY_RESOURCES,
    }
    pod = {"automountServiceAccountToken": False, "containers": [container]}  # it reads no API
    meta = cluster.meta(name)
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": pods},
                "template": {"metadata": {"labels": meta["labels"] | pods}, "spec": pod},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "selector": pods,
                "ports": [
                    {"name": "sse", "port": port, "targetPort": "sse"},
                    {"name": "control", "port": CONTROL_PORT, "targetPort": "control"},
                ],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta,
            "spec": {
                "podSelector": {"matchLabels": pods},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {"ports": [{"port": port, "protocol": "TCP"}]},  # the streams, from wherever they are routed
                    {"from": [{"podSelector": {}}], "ports": [{"port": CONTROL_PORT, "protocol": "TCP"}]},
                ],
            },
        },
    ]
