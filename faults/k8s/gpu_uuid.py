"""`llmchaos k8s gpu`: which GPU the server's pod holds, as the GPU Job asks it on the pod's node.

The device plugin gives a container its GPUs as `NVIDIA_VISIBLE_DEVICES` at creation (their UUIDs,
or MIG devices'), in the runtime's environment, not in the pod object. So the Job, in the node's PID
namespace (hostPID), finds the server pod's processes by its UID in their cgroup path and reads that
variable from their environment. A window's `gpu: N` is the pod's Nth GPU; a list of indices (a
runtime configured so) is used as nvidia-smi's index, with a warning."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from faults.k8s import kube
from llmchaos.errors import UsageError

log = logging.getLogger("llmchaos.faults")

VARIABLE = b"NVIDIA_VISIBLE_DEVICES="
UUID = re.compile(r"(GPU|MIG)-[0-9A-Za-z-]+(/\d+/\d+)?")
NO_LIST = {"", "all", "none", "void"}  # the toolkit's words for no particular device


@dataclass(frozen=True)
class Pod:
    name: str
    uid: str


def pods_on(namespace: str, selector: str, node: str) -> list[Pod]:
    """The pods of `selector` in `namespace` on `node`, by name, through the API (in a pod: its
    ServiceAccount)."""
    from kubernetes import client

    kube.configure()
    try:
        found = client.CoreV1Api().list_namespaced_pod(
            namespace, label_selector=selector, field_selector=f"spec.nodeName={node}"
        )
    except client.ApiException as e:  # forbidden (the Role not bound), or no such namespace
        raise UsageError(f"listing the pods of {selector} in {namespace}: {e.status} {e.reason}") from None
    metas = [p.metadata for p in found.items if p.metadata and p.metadata.name and p.metadata.uid]
    return sorted((Pod(str(m.name), str(m.uid)) for m in metas), key=lambda p: p.name)


def visible(uid: str, proc: Path) -> list[str] | None:
    """NVIDIA_VISIBLE_DEVICES of a process of the pod `uid` (its cgroup path names the UID, with
    '_' for '-' under systemd's driver), as a list; None when no process of it lists devices."""
    forms = (uid, uid.replace("-", "_"))
    try:
        entries = list(proc.iterdir())
    except OSError as e:
        raise UsageError(
            f"cannot list the node's processes: {e.strerror or e}", file=str(proc), field="--proc"
        ) from None
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            if not any(f in (entry / "cgroup").read_text() for f in forms):
                continue
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        for item in environ.split(b"\0"):
            if item.startswith(VARIABLE):
                value = item[len(VARIABLE) :].decode("ascii", "replace").strip()
                if value.lower() not in NO_LIST:
                    return [v.strip() for v in value.split(",")]
    return None


def choose(pods: list[Pod], index: int, proc: Path) -> str:
    """The Nth GPU of the first pod (by name) that holds any, as nvidia-smi's -i takes it."""
    if not pods:
        raise UsageError("no pod of the selector on this node: the Job's podAffinity placed it by one")
    for pod in pods:
        devices = visible(pod.uid, proc)
        if devices is None:
            continue
        if index >= len(devices):
            raise UsageError(f"pod {pod.name} holds {len(devices)} GPUs ({','.join(devices)}): no gpu {index}")
        device = devices[index]
        if not UUID.fullmatch(device):
            log.warning("pod %s lists GPU %r, not a UUID: used as nvidia-smi's index", pod.name, device)
        return device
    names = ", ".join(p.name for p in pods)
    log.warning("no process of %s lists NVIDIA_VISIBLE_DEVICES: nvidia-smi's index %d, unchecked", names, index)
    return str(index)
