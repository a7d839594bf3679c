"""`gpu_clock` windows: a Suspend step of the window's length in the Workflow, and a one-shot Job on
the GPU node (--gpu-node, by nodeName) that locks the clocks while that step runs.

Chaos Mesh has no GPU fault, and a Workflow's own pods cannot be pinned to a node, so the Job is
applied with the Workflow and follows its step through the Kubernetes API (`llmchaos k8s wait`). It
requests no GPU (the server holds them) and reaches the driver's nvidia-smi in the node's own mount
namespace (privileged, hostPID). It checks the clocks against the GPU's supported ones, resets any
lock first, locks, and resets again on every way out: the step's end, the Workflow deleted, SIGTERM
(the Job deleted, its activeDeadlineSeconds passed) through a trap."""

from __future__ import annotations

from faults.injectors.base import FieldError
from faults.injectors.gpu_clock import clock_range
from faults.k8s import names
from faults.k8s.cluster import Cluster, Piece, Step, go_duration, reader_role
from faults.schedule import FaultSpec

GRACE_S = 120  # the Job's deadline past its window's end: pulling the image, the API's delays
SCRIPT = r"""set -u
smi() { nsenter -t 1 -m -- "$NVIDIA_SMI" -i "$GPU" "$@"; }
reset() { smi -rgc; if [ -n "$MEMORY_MHZ" ]; then smi -rmc; fi; }
within() {
  clocks=$(smi --query-supported-clocks="$1" --format=csv,noheader,nounits) || exit 1
  lo=$(echo "$clocks" | sort -n | head -n 1); hi=$(echo "$clocks" | sort -n | tail -n 1)
  case "$lo$hi" in *[!0-9]* | "") echo "llmchaos: GPU $GPU lists no supported $1 clocks: $clocks" >&2; exit 1;; esac
  for mhz in "${2%,*}" "${2#*,}"; do
    if [ "$mhz" -lt "$lo" ] || [ "$mhz" -gt "$hi" ]; then
      echo "llmchaos: GPU $GPU: $1 clock $mhz MHz is not within the supported $lo..$hi MHz" >&2; exit 1
    fi
  done
}
follow() { llmchaos k8s wait "$NAMESPACE/$WORKFLOW" --step "$STEP" --for "$1" & wait $!; }
within graphics "$GRAPHICS_MHZ"
if [ -n "$MEMORY_MHZ" ]; then within memory "$MEMORY_MHZ"; fi
reset || exit 1
trap reset EXIT
trap 'exit 143' TERM INT HUP
follow start || exit 0
smi -lgc "$GRAPHICS_MHZ" || exit 1
if [ -n "$MEMORY_MHZ" ]; then smi -lmc "$MEMORY_MHZ" || exit 1; fi
echo "llmchaos: GPU $GPU locked for step $STEP"
follow end
"""


def _lock(params: dict, key: str) -> str:
    """nvidia-smi's MIN,MAX of a clock param (a number locks both ends)."""
    return ",".join(map(str, clock_range(params, key)))


def check(spec: FaultSpec, cluster: Cluster) -> None:
    if "sim" in spec.target:
        raise FieldError(
            "target.sim", "the simulated device is reached by URL from a runner; on a cluster lock a GPU: {gpu: N}"
        )
    if not cluster.gpu_node:
        raise FieldError("target", "gpu_clock runs on the GPU node: give --gpu-node")


def account(cluster: Cluster) -> str:
    return f"{cluster.run}-gpu"


def piece(step: Step, cluster: Cluster) -> Piece:
    w = step.window
    env = {
        "GPU": str(w.target["gpu"]),
        "GRAPHICS_MHZ": _lock(w.params, "graphics_mhz"),
        "MEMORY_MHZ": _lock(w.params, "memory_mhz") if "memory_mhz" in w.params else "",
        "NVIDIA_SMI": cluster.nvidia_smi,
        "NAMESPACE": cluster.namespace,
        "WORKFLOW": cluster.run,
        "STEP": step.name,
    }
    pod = {
        "nodeName": cluster.gpu_node,
        "hostPID": True,
        "restartPolicy": "Never",
        "serviceAccountName": account(cluster),
        "tolerations": [{"operator": "Exists"}],  # a GPU node's taints keep other pods off, not this one
        "containers": [
            {
                "name": "lock",
                "image": cluster.image,
                "command": ["sh", "-c", SCRIPT],
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "securityContext": {"privileged": True},
                "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            }
        ],
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": cluster.meta(f"{cluster.run}-{step.name}", w.name),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": round(w.end) + GRACE_S,
            "template": {"metadata": {"labels": names.labels(cluster.run, w.name)}, "spec": pod},
        },
    }
    template = {"name": step.name, "templateType": "Suspend", "deadline": go_duration(w.end - w.start)}
    account_objects = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": cluster.meta(account(cluster))}]
    return Piece(template, setup=account_objects + reader_role(cluster.meta(account(cluster))), beside=[job])
