"""podchaos_webhook.go: a container-kill names its containers."""

from __future__ import annotations

from faults.k8s.admission.common import CONTAINER_SELECTOR, DURATION
from faults.k8s.admission.fielderrors import GoValue, Path, invalid, strings
from faults.k8s.admission.walk import Field, Struct


def _container_names(v: dict, path: Path) -> list[str]:
    names = v.get("containerNames")
    if v.get("action") != "container-kill" or names:
        return []
    shown = GoValue("[]string(nil)") if names is None else strings(names)
    detail = "the name of container is required on container-kill action: invalid value"  # errors.Wrapf's
    return [invalid(path.child("containerNames"), shown, detail)]


SPEC = Struct((Field("ContainerSelector", of=CONTAINER_SELECTOR), DURATION), check=_container_names)
ROOT = Struct((Field("Spec", "spec", of=SPEC),))
