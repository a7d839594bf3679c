"""`router` windows: refused on a cluster. Taking a replica out of a router's pool while it runs is
the router's own state (the stand-in's admin API); no Chaos Mesh object does it without touching
the pod itself, which is what the window must not do."""

from __future__ import annotations

from faults.injectors.base import FieldError
from faults.k8s.cluster import Cluster, Piece, Step
from faults.schedule import FaultSpec


def check(spec: FaultSpec, cluster: Cluster) -> None:
    raise FieldError(
        "kind",
        "router: no Chaos Mesh object takes a pod out of a router's pool without touching the pod "
        "(the stand-in's admin API does, from llmchaos faults run)",
    )


def piece(step: Step, cluster: Cluster) -> Piece:
    raise AssertionError("check refuses every router window before rendering")  # pragma: no cover
