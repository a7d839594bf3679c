"""The kinds a cluster cannot render: each window refused when checked, before anything is written,
with the reason on the field at fault."""

from __future__ import annotations

from dataclasses import dataclass

from faults.injectors.base import FieldError
from faults.k8s.cluster import Cluster, Piece, Step
from faults.schedule import FaultSpec


@dataclass(frozen=True)
class Refused:
    field: str
    reason: str

    def check(self, spec: FaultSpec, cluster: Cluster) -> None:
        raise FieldError(self.field, self.reason)

    def piece(self, step: Step, cluster: Cluster) -> Piece:
        raise AssertionError("check refuses every such window before rendering")  # pragma: no cover


# The reference server's admin API, reached by URL from a runner (or a fault host beside the server),
# as gpu_clock's simulated device is: a Workflow has no step that calls it.
CORRUPT = Refused(
    "target.sim",
    "corrupt is the reference server's admin API, reached by URL from a runner (llmchaos faults run), not a cluster's",
)
CACHE_FLUSH = Refused(
    "target.sim",
    "cache_flush is the server's admin route (POST /reset_prefix_cache), called by URL from a runner "
    "(llmchaos faults run), not a cluster's",
)
# A replica out of a router's pool while it runs is the router's own state: no Chaos Mesh object
# does it without touching the pod itself, which is what the window must not do.
ROUTER = Refused(
    "kind",
    "router: no Chaos Mesh object takes a pod out of a router's pool without touching the pod "
    "(the stand-in's admin API does, from llmchaos faults run)",
)
