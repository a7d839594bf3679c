"""`docker` windows as a PodChaos step. A container target is a container of the server's pods
(--selector); a label target (`key=value`, or `key` alone) selects the pods that carry it.

kill -> container-kill (SIGKILL, the kubelet restarts it), stop and restart -> pod-kill with the
stop's timeout as grace period (its controller starts it again at once). A pause has no PodChaos:
pod-failure restarts the container (a GPU server reloads its model, minutes, where a pause froze it
for the window), so it is refused unless the schedule asks for `cluster: partition`, a NetworkChaos
dropping every packet the pods send for the window (silent, connections held open, as a frozen
process; the whole pod, not one container of it). A CPU quota or a network disconnect has no PodChaos."""

from __future__ import annotations

import re

from faults.injectors.base import FieldError, number
from faults.injectors.docker import _signal
from faults.k8s.cluster import Cluster, Piece, Step, go_duration
from faults.schedule import FaultSpec

ACTIONS = {"kill": "container-kill", "stop": "pod-kill", "restart": "pod-kill"}
PAUSE = (
    "pause: Chaos Mesh's pod-failure restarts the container (a GPU server reloads its model: minutes, not a "
    "freeze of the window); the faithful one is a partition of its pods, every packet they send dropped: "
    "params {action: pause, cluster: partition} renders that, as would a netem window with {loss: 100%}"
)
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
    if action == "pause" and spec.params.get("cluster") != "partition":
        raise FieldError("params.action", PAUSE)
    if action == "kill" and _signal(spec.params.get("signal", "SIGKILL")) != "SIGKILL":
        raise FieldError("params.signal", "Chaos Mesh's container-kill sends SIGKILL only")
    if "label" in target:
        key, _, value = target["label"].partition("=")
        if not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
            raise FieldError("target.label", f"{target['label']!r} is not a Kubernetes label (key=value)")
    else:
        cluster.server_pods("a container target")


def _selector(target: dict, cluster: Cluster) -> dict:
    if "label" not in target:
        return cluster.server_pods("a container target")
    key, eq, value = target["label"].partition("=")
    return {"namespaces": [cluster.namespace]} | (
        {"labelSelectors": {key: value}} if eq else {"expressionSelectors": [{"key": key, "operator": "Exists"}]}
    )


def piece(step: Step, cluster: Cluster) -> Piece:
    w = step.window
    deadline = go_duration(w.end - w.start)
    if w.params["action"] == "pause":  # cluster: partition (check refused the others)
        partition = {"action": "loss", "mode": "all", "selector": _selector(w.target, cluster), "direction": "to"}
        partition["loss"] = {"loss": "100"}
        return Piece(
            {"name": step.name, "templateType": "NetworkChaos", "deadline": deadline, "networkChaos": partition}
        )
    action = ACTIONS[w.params["action"]]
    chaos: dict = {"action": action, "mode": "all", "selector": _selector(w.target, cluster)}
    if "label" not in w.target:
        chaos["containerNames"] = [w.target["container"]]
    if action == "pod-kill":
        timeout = number(w.params, "timeout", "s") if "timeout" in w.params else STOP_TIMEOUT_S
        chaos["gracePeriod"] = round(timeout)
    return Piece({"name": step.name, "templateType": "PodChaos", "deadline": deadline, "podChaos": chaos})
