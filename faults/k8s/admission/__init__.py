"""Chaos Mesh's admission webhooks, ported from chaos-mesh/chaos-mesh v2.7.3 (`api/v1alpha1/*_webhook.go`,
`api/genericwebhook`): what the cluster refuses at apply, worded as it refuses it. Workflow,
NetworkChaos, PodChaos and StressChaos have their rules; other chaos kinds in a Workflow get the
Workflow's own."""

from __future__ import annotations

from faults.k8s.admission import network, pod, stress, workflow
from faults.k8s.admission.fielderrors import aggregate
from faults.k8s.admission.walk import validate

VERSION = "v2.7.3"
API = "chaos-mesh.org/v1alpha1"
CHAOS = {"NetworkChaos": network.ROOT, "PodChaos": pod.ROOT, "StressChaos": stress.ROOT}


def errors(obj: dict) -> list[str]:
    """The webhook's field errors for `obj`; [] for an object it admits or has no webhook for."""
    kind = obj.get("kind")
    if obj.get("apiVersion") != API:
        return []
    if kind == "Workflow":
        return workflow.errors(obj)
    if kind in CHAOS:
        return validate(CHAOS[kind], obj)
    return []


def refusal(obj: dict) -> str | None:
    """The API server's answer to applying `obj`, as kubectl prints it after the object's name; None: admitted."""
    found = errors(obj)
    if not found:
        return None
    return f'admission webhook "v{str(obj["kind"]).lower()}.kb.io" denied the request: {aggregate(found)}'
