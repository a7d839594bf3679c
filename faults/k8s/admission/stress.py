"""stresschaos_webhook.go: at least one stressor, and a memory size Docker's units read."""

from __future__ import annotations

from faults.k8s.admission.common import CONTAINER_SELECTOR, DURATION
from faults.k8s.admission.fielderrors import Path, invalid, struct
from faults.k8s.admission.goparse import GoError, atoi, from_human_size
from faults.k8s.admission.walk import Field, Struct


def _spec(v: dict, path: Path) -> list[str]:
    if not v.get("stressngStressors") and v.get("stressors") is None:
        return [invalid(path, struct("StressChaosSpec"), "missing stressors")]
    return []


def _stressors(v: dict, path: Path) -> list[str]:
    if v.get("memory") is None and v.get("cpu") is None:
        return [invalid(path, struct("Stressors"), "missing stressors")]
    return []


def _bytes(v: object, path: Path) -> list[str]:
    size = str(v)
    if not size:
        return []
    try:
        if size.endswith("%"):
            if not 0 <= atoi(size[:-1]) <= 100:
                raise GoError("illegal proportion")
        else:
            from_human_size(size)
    except GoError as e:
        return [invalid(path, v, f"incorrect bytes format: {e}")]
    return []


MEMORY = Struct((Field("Size", "size", check=_bytes),))
STRESSORS = Struct((Field("MemoryStressor", "memory", of=MEMORY, pointer=True),), check=_stressors)
SPEC = Struct(
    (
        Field("ContainerSelector", of=CONTAINER_SELECTOR),
        Field("Stressors", "stressors", of=STRESSORS, pointer=True),
        DURATION,
    ),
    check=_spec,
)
ROOT = Struct((Field("Spec", "spec", of=SPEC),))
