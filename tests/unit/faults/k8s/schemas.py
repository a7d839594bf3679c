"""What an API server would check of a rendered object, without a cluster (faults/k8s/check.py):
Chaos Mesh's kinds against their CRDs, read from ../shared/k8s (see its README; never copied here)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from faults.k8s import check
from tests.procs import ROOT


def crd_dir() -> Path:
    """../shared/k8s/chaos-mesh-crds next to the checkout (or next to the folder of worktrees)."""
    for parent in Path(ROOT).parents:
        found = parent / "shared" / "k8s" / "chaos-mesh-crds"
        if found.is_dir():
            return found
    pytest.skip("Chaos Mesh CRDs not found at ../shared/k8s/chaos-mesh-crds next to the checkout")


@functools.cache
def crds() -> check.Schemas:
    return check.crds([str(crd_dir())])


def errors(obj: dict) -> list[str]:
    """Every reason the API server would refuse `obj`, each after its Kind/name; [] when it would take it."""
    where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    return [f"{where}: {line}" for line in check.problems(obj, crds())]
