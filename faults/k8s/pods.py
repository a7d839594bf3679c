"""`docker` windows as a PodChaos step. A container target is a container of the server's pods
(--selector); a label target (`key=value`, or `key` alone) selects the pods that carry it.

pause -> pod-failure (the pods stop serving for the window and come back after it; a paused
container held its connections, a failed pod drops them), kill -> container-kill (SIGKILL, the
kubelet restarts it), stop and restart -> pod-kill with the stop's timeout as grace period (its
controller starts it again at once). A CPU quota or a network disconnect has no PodChaos."""

from __future__ import annotations

import re

from faults.injectors.base import FieldError, number
from faults.injectors.docker import _signal
from faults.k8s.cluster import Cluster, Piece, Step, go_duration
from faults.schedule import FaultSpec

ACTIONS = {"pause": "pod-failure", "kill": "container-kill", "stop": "pod-kill", "restart": "pod-kill"}
NONE = {
    "cpu": "a CPU quota has no Chaos Mesh equivalent (StressChaos adds load, it does not cap)",
    "disconnect": "a Docker network has no pod equivalent",
}
NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{NAME}")
LABEL_VALUE = re.compile(rf"({NAME})?")
STOP_TIMEOUT_S = 10  # docker stop's own default


def check(spec: FaultSpec, cluster: Cluster) -> None:
    target, action = spec.target, spec.params["action"]
    if "host" in target:
        raise FieldError("target.host", "a Docker daemon's address has no meaning on a cluster")
    if action in NONE:
        raise FieldError("params.action", f"{action}: {NONE[action]}")
    if action == "kill" and _signal(spec.params.get("signal", "SIGKILL")) != "SIGKILL":
        raise FieldError("params.signal", "Chaos Mesh's container-kill sends SIGKILL only")
    if "label" in target:
        key, _, value = target["label"].partition("=")
        if not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
            raise FieldError("target.label", f"{target['label']!r} is not a Kubernetes label (key=value)")
    else:
        cluster.server_pods("a container target")


def piece(step: Step, cluster: Cluster) -> Piece:
    w = step.window
    action = ACTIONS[w.params["action"]]
    chaos: dict = {"action": action, "mode": "all"}
    if "label" in w.target:
        key, eq, value = w.target["label"].partition("=")
        chaos["selector"] = {"namespaces": [cluster.namespace]} | (
            {"labelSelectors": {key: value}} if eq else {"expressionSelectors": [{"key": key, "operator": "Exists"}]}
        )
    else:
        chaos["selector"] = cluster.server_pods("a container target")
        chaos["containerNames"] = [w.target["container"]]
    if action == "pod-kill":
        timeout = number(w.params, "timeout", "s") if "timeout" in w.params else STOP_TIMEOUT_S
        chaos["gracePeriod"] = round(timeout)
    return Piece(
        {"name": step.name, "templateType": "PodChaos", "deadline": go_duration(w.end - w.start), "podChaos": chaos}
    )
