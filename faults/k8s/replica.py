"""`replica` windows as a PodChaos `pod-kill` step on one replica's pod: the replicas are one
StatefulSet's pods (--replica-selector), and `target.replica: I` is the one whose pod index is I
(the `apps.kubernetes.io/pod-index` label Kubernetes 1.28+ puts on a StatefulSet's pods); the
target's `sim` (the stand-in router's URL) has no meaning there.

`kill` and `restart` are a pod-kill with no grace period (SIGKILL, as the stand-in's); the
StatefulSet starts the pod again at once, so a kill, which the stand-in keeps dead for the window, is
a restart on a cluster. `pause` (SIGSTOP: connections held open, silent) has no PodChaos, and
`holding` (the replica the router believes holds a prefix, asked at run time) no selector: both
are refused, naming what to write instead."""

from __future__ import annotations

from faults.injectors.base import FieldError
from faults.k8s.cluster import Cluster, Piece, Step, go_duration
from faults.schedule import FaultSpec

POD_INDEX = "apps.kubernetes.io/pod-index"  # a StatefulSet's pods' ordinal, as a label


def check(spec: FaultSpec, cluster: Cluster) -> None:
    if "holding" in spec.target:
        raise FieldError(
            "target.holding",
            "which replica holds a prefix is the router's belief at run time, which no Chaos Mesh selector "
            "asks: name the replica (replica: I)",
        )
    if spec.params["action"] == "pause":
        raise FieldError(
            "params.action",
            "pause: no PodChaos stops a pod and keeps its connections (pod-failure drops them); the faithful "
            f"one is a partition of its pod: a netem window, params {{loss: 100%}}, --selector ...,{POD_INDEX}=I",
        )
    replica_pods(cluster, spec.target["replica"])


def replica_pods(cluster: Cluster, index: int) -> dict:
    """The selector of replica `index`'s pod."""
    selector = cluster.pods(cluster.replicas, "replica acts on a router's replicas", "--replica-selector", "app=engine")
    selector["labelSelectors"][POD_INDEX] = str(index)
    return selector


def piece(step: Step, cluster: Cluster) -> Piece:
    w = step.window
    chaos = {
        "action": "pod-kill",
        "mode": "one",
        "selector": replica_pods(cluster, w.target["replica"]),
        "gracePeriod": 0,
    }
    return Piece(
        {"name": step.name, "templateType": "PodChaos", "deadline": go_duration(w.end - w.start), "podChaos": chaos}
    )
