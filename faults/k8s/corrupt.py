"""`corrupt` windows: refused on a cluster. The fault is the reference server's own admin API, reached
by URL from a runner (`llmchaos faults run`, or a fault host beside the server), as gpu_clock's
simulated device is; a Workflow has no step that calls it."""

from __future__ import annotations

from faults.injectors.base import FieldError
from faults.k8s.cluster import Cluster, Piece, Step
from faults.schedule import FaultSpec


def check(spec: FaultSpec, cluster: Cluster) -> None:
    raise FieldError(
        "target.sim",
        "corrupt is the reference server's admin API, reached by URL from a runner (llmchaos faults run), "
        "not a cluster's",
    )


def piece(step: Step, cluster: Cluster) -> Piece:
    raise AssertionError("check refuses every corrupt window before rendering")  # pragma: no cover
