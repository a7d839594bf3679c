"""`gpu_clock` windows: a Suspend step of the window's length in the Workflow, and a one-shot Job
beside a server pod that locks its GPU's clocks while that step runs.

Chaos Mesh has no GPU fault, and a Workflow's own pods cannot be placed, so the Job is applied with
the Workflow and follows its step through the Kubernetes API (`llmchaos k8s wait`). It is placed by
required podAffinity to the --selector pods (the node one of them runs on, wherever it moved),
tolerates only the GPU taint, requests no GPU (the server holds them) and locks the GPU the server
pod holds, named by its UUID (`llmchaos k8s gpu`). It reaches the driver one of two ways
(--gpu-access): `driver-root`, chroot into the node's driver root (--driver-root; auto: the GPU
operator's /run/nvidia/driver where it is there, else the node's /), as the operator's own
validator does; or `runtime-class`, the NVIDIA runtime mounting the driver's tools into the
container (runtimeClassName nvidia, NVIDIA_VISIBLE_DEVICES=all). Privileged with hostPID, it runs in
its own namespace (--gpu-namespace, Pod Security `privileged`), so the run's namespace can enforce
`restricted`.

It checks the clocks against the GPU's supported ones, resets any lock first, locks only once the
step is on with its deadline ahead, and resets on every way out: the step's end, an abort, the
Workflow deleted, SIGTERM (the Job deleted, its activeDeadlineSeconds passed) through a trap. Its
termination message records the GPU and the lock's and the reset's unix times, for the phases."""

from __future__ import annotations

from faults.injectors.base import FieldError
from faults.injectors.gpu_clock import clock_range
from faults.k8s import names
from faults.k8s.cluster import Cluster, Piece, Step, go_duration, reader_role
from faults.schedule import FaultSpec

GRACE_S = 120  # the Job's deadline past its window's end: pulling the image, the API's delays
TTL_S = 3600  # a finished Job stays this long: its record read, then gone, so the drill can run again
TAINT = "nvidia.com/gpu"  # what the GPU operator and the cloud GPU node pools taint GPU nodes with
TERMINATION_LOG = "/dev/termination-log"
SCRIPT = r"""set -u
GPU=$(llmchaos k8s gpu "$NAMESPACE" --selector "$SELECTOR" --node "$NODE_NAME" --index "$GPU_INDEX" \
  --proc "$HOST_PROC") || exit 1
if [ "$ACCESS" = runtime-class ]; then
  smi() { nvidia-smi -i "$GPU" "$@"; }
else
  root=$DRIVER_ROOT
  if [ "$root" = auto ]; then
    if [ -e "$HOST_ROOT/run/nvidia/driver/usr/bin/nvidia-smi" ]; then root=/run/nvidia/driver; else root=/; fi
  fi
  smi() { chroot "$HOST_ROOT$root" nvidia-smi -i "$GPU" "$@"; }
fi
record() { echo "$1 $2" >> "$TERMINATION_LOG"; }
locked=""
reset() { smi -rgc; if [ -n "$MEMORY_MHZ" ]; then smi -rmc; fi; }
unlock() { reset; if [ -n "$locked" ]; then record reset "$(date +%s.%N)"; fi; }
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
record gpu "$GPU"
within graphics "$GRAPHICS_MHZ"
if [ -n "$MEMORY_MHZ" ]; then within memory "$MEMORY_MHZ"; fi
reset || exit 1
trap unlock EXIT
trap 'exit 143' TERM INT HUP
follow start || exit 0
smi -lgc "$GRAPHICS_MHZ" || exit 1
if [ -n "$MEMORY_MHZ" ]; then smi -lmc "$MEMORY_MHZ" || exit 1; fi
locked=1
record locked "$(date +%s.%N)"
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
    cluster.server_pods("gpu_clock locks the GPU a server pod holds, on its node")


def account(cluster: Cluster) -> str:
    return f"{cluster.run}-gpu"


def namespace(cluster: Cluster) -> dict:
    """The GPU Jobs' namespace, the one Pod Security level that admits a privileged, hostPID pod."""
    labels = names.labels(cluster.run) | {f"pod-security.kubernetes.io/{m}": "privileged" for m in ("enforce", "warn")}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.gpu_namespace, "labels": labels}}


def access(cluster: Cluster) -> tuple[dict[str, str], dict]:
    """The container's environment and the pod's fields that reach the driver."""
    if cluster.gpu_access == "runtime-class":  # the NVIDIA container runtime mounts nvidia-smi and every GPU
        env = {"ACCESS": "runtime-class", "NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"}
        return env, {"runtimeClassName": "nvidia"}
    return {"ACCESS": "driver-root", "DRIVER_ROOT": cluster.driver_root, "HOST_ROOT": "/proc/1/root"}, {}


def piece(step: Step, cluster: Cluster) -> Piece:
    w = step.window
    reached, fields = access(cluster)
    env = {
        "GPU_INDEX": str(w.target["gpu"]),
        "GRAPHICS_MHZ": _lock(w.params, "graphics_mhz"),
        "MEMORY_MHZ": _lock(w.params, "memory_mhz") if "memory_mhz" in w.params else "",
        "SELECTOR": ",".join(f"{k}={v}" for k, v in cluster.selector.items()),
        "NAMESPACE": cluster.namespace,
        "WORKFLOW": cluster.run,
        "STEP": step.name,
        "TERMINATION_LOG": TERMINATION_LOG,
        "HOST_PROC": "/proc",  # the node's, with hostPID: the server pod's processes among them
    } | reached
    beside_server = {
        "labelSelector": {"matchLabels": dict(cluster.selector)},
        "namespaces": [cluster.namespace],
        "topologyKey": "kubernetes.io/hostname",
    }
    node_name = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    pod = {
        "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [beside_server]}},
        "hostPID": True,
        "restartPolicy": "Never",
        "serviceAccountName": account(cluster),
        "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
        **fields,
        "containers": [
            {
                "name": "lock",
                "image": cluster.image,
                "command": ["sh", "-c", SCRIPT],
                "env": [{"name": k, "value": v} for k, v in env.items()] + [node_name],
                "securityContext": {"privileged": True},
                "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                "terminationMessagePath": TERMINATION_LOG,
                "terminationMessagePolicy": "File",
            }
        ],
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": names.meta(f"{cluster.run}-{step.name}", cluster.gpu_namespace, cluster.run, w.name),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": round(w.end) + GRACE_S,
            "ttlSecondsAfterFinished": TTL_S,
            "template": {"metadata": {"labels": names.labels(cluster.run, w.name)}, "spec": pod},
        },
    }
    template = {"name": step.name, "templateType": "Suspend", "deadline": go_duration(w.end - w.start)}
    sa = names.meta(account(cluster), cluster.gpu_namespace, cluster.run)
    role = reader_role(cluster.meta(account(cluster)), subject=sa, pods=True)  # in the run's namespace
    objects = [namespace(cluster), {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": sa}, *role]
    return Piece(template, setup=objects, beside=[job])
