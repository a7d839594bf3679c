"""`llmchaos k8s render-load`: the load test on a cluster, from the image compose/Dockerfile builds
(the harness installed, its sources in /src). A Locust master (web UI, its Service), N workers, the
schedule, SLO and guard files in a ConfigMap, the results on a PersistentVolumeClaim, the Pushgateway's
URL; with `--k8s-workflow`, an account that reads the Workflow, for the phases. With `operator`, a
`LocustTest` (locust.io/v2) for the Locust Kubernetes operator instead of the master and workers: it
runs the image with Locust's arguments alone (compose/Dockerfile's `load` target: ENTRYPOINT locust),
mounts the ConfigMap at /lotest/src and, on the master, the results' volume."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from faults import schedule
from faults.injectors import KINDS
from faults.k8s import names
from faults.k8s.cluster import reader_role
from faults.k8s.podsecurity import HOME, USER, container_context
from llmchaos import slo, yamlfile
from llmchaos.errors import UsageError

LOCUSTFILE = "/src/loadtests/locustfile.py"
MOUNT, OPERATOR_MOUNT = "/etc/llmchaos", "/lotest/src"
WEB, MASTER, METRICS = 8089, 5557, 9646
MASTER_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}
WORKER_RESOURCES = {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}  # one core: Locust's
JOB_TTL_S = 86400  # a finished headless run's Jobs stay a day (their pods' logs), then go; the results stay
QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?([KMGTPE]i|[kMGTPE])?")


@dataclass(frozen=True)
class Load:
    host: str
    name: str = "llmchaos-load"
    namespace: str = "default"
    image: str = "llmchaos:0.1.0"
    workers: int = 2
    files: dict[str, str] = field(default_factory=dict)  # option (schedule, slo, guard) -> the user's file
    push_gateway: str = ""
    results_size: str = "1Gi"
    storage_class: str = ""  # the results' PersistentVolumeClaim's; the cluster's default without
    workflow: str = ""  # --k8s-workflow
    gpu_namespace: str = ""  # where its GPU Jobs run: read for their lock records
    operator: bool = False
    locust_args: tuple[str, ...] = ()

    def meta(self, name: str) -> dict:
        return names.meta(name, self.namespace, self.name)

    @property
    def headless(self) -> bool:
        """A run with no one at its web UI: Jobs that end with the test, not Deployments."""
        return "--headless" in self.locust_args


def _read(option: str, path: str) -> str:
    """The file's text, checked as its option will read it (a guard file as YAML only: the load
    test's own module reads it, which faults does not import)."""
    if option == "schedule":
        schedule.load(path, KINDS)
    elif option == "slo":
        slo.load(path)
    else:
        yamlfile.compose(path)
    with open(path, encoding="utf-8") as f:
        return f.read()


def render(load: Load) -> list[dict]:
    if not QUANTITY.fullmatch(load.results_size):
        raise UsageError(f"expected a size such as 1Gi, got {load.results_size!r}", field="--results-size")
    data = {f"{option}.yaml": _read(option, path) for option, path in load.files.items()}
    mount = OPERATOR_MOUNT if load.operator else MOUNT
    args = [f"--host={load.host}", *(f"--{option}={mount}/{option}.yaml" for option in load.files)]
    args += [f"--push-gateway={load.push_gateway}"] if load.push_gateway else []
    args += [f"--k8s-workflow={load.namespace}/{load.workflow}"] if load.workflow else []
    out: list[dict] = []
    if data:
        out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": load.meta(f"{load.name}-files"), "data": data})
    account = f"{load.name}-phases"
    if load.workflow:  # the operator's pods run as the namespace's default account
        if not load.operator:
            out.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": load.meta(account)})
        subject = load.meta("default") if load.operator else None
        out += reader_role(load.meta(account), subject, pods=True, chaos=True)  # the steps and what they did
        if load.gpu_namespace:  # the GPU Jobs' records, in their own namespace
            where = names.meta(account, load.gpu_namespace, load.name)
            out += reader_role(where, subject or load.meta(account), pods=True)
    pvc_spec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": load.results_size}}}
    pvc_spec |= {"storageClassName": load.storage_class} if load.storage_class else {}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": load.meta(f"{load.name}-results")}
    out.append(claim | {"spec": pvc_spec})
    volumes = [{"name": "results", "persistentVolumeClaim": {"claimName": f"{load.name}-results"}}]
    if load.operator:
        return [*out, operator_test(load, args, bool(data), volumes)]
    master = f"{load.name}-master"
    mounts: list[dict] = [{"name": "results", "mountPath": "/results"}]
    if data:
        volumes.append({"name": "files", "configMap": {"name": f"{load.name}-files"}})
        mounts.append({"name": "files", "mountPath": MOUNT, "readOnly": True})
    command = ["locust", "-f", LOCUSTFILE, "--master", "--results-dir=/results", f"--prometheus-port={METRICS}"]
    if load.headless and not any(a.startswith("--expect-workers") for a in load.locust_args):
        command.append(f"--expect-workers={load.workers}")  # it starts the test once all have connected
    ports = {"master": MASTER, "metrics": METRICS} | ({} if load.headless else {"web": WEB})
    # ready once it takes workers (a headless master serves no web UI); else once its UI answers
    ready = {"tcpSocket": {"port": "master"}} if load.headless else {"httpGet": {"path": "/", "port": "web"}}
    master_container = {
        "name": "master",
        "image": load.image,
        "command": command + args + list(load.locust_args),
        "ports": [{"name": n, "containerPort": p} for n, p in ports.items()],
        "volumeMounts": mounts,
        "readinessProbe": ready | {"periodSeconds": 5},
        "env": [HOME],
        "securityContext": container_context(),
        "resources": MASTER_RESOURCES,
    }
    worker_container = {
        "name": "worker",
        "image": load.image,
        "command": ["locust", "-f", LOCUSTFILE, "--worker", f"--master-host={master}"],
        "env": [HOME],
        "securityContext": container_context(),
        "resources": WORKER_RESOURCES,
    }
    return [
        *out,
        _workload(load, master, 1, master_container, volumes, account),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": load.meta(master),
            "spec": {
                "selector": _pods(load, master),
                "ports": [{"name": n, "port": p, "targetPort": n} for n, p in ports.items()],
            },
        },
        _workload(load, f"{load.name}-worker", load.workers, worker_container, [], account, spread=True),
    ]


def _pods(load: Load, name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "llmchaos-locust", "app.kubernetes.io/instance": name}


def _workload(
    load: Load, name: str, replicas: int, container: dict, volumes: list[dict], account: str, spread: bool = False
) -> dict:
    """`replicas` pods of `container`: a Deployment (the master's recreated, not rolled: its volume is
    ReadWriteOnce), or for a headless run a Job that ends with the test, none retried (a second
    master would be another test) and gone a day after, its results on their volume."""
    meta = load.meta(name)
    pod: dict = {"containers": [container]}
    pod |= {"volumes": volumes, "securityContext": {"fsGroup": USER}} if volumes else {}  # the results: ours to write
    # an account only to read the Workflow; else no token at all
    pod |= {"serviceAccountName": account} if load.workflow else {"automountServiceAccountToken": False}
    if spread:  # the workers over nodes where they can: one node's CPU is not the load's ceiling
        term = {"labelSelector": {"matchLabels": _pods(load, name)}, "topologyKey": "kubernetes.io/hostname"}
        pod["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
            }
        }
    template = {"metadata": {"labels": meta["labels"] | _pods(load, name)}, "spec": pod}
    if load.headless:
        template["spec"] = pod | {"restartPolicy": "Never"}
        spec: dict = {"parallelism": replicas, "completions": replicas, "backoffLimit": 0}
        spec |= {"ttlSecondsAfterFinished": JOB_TTL_S, "template": template}
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
    spec = {"replicas": replicas, "selector": {"matchLabels": _pods(load, name)}, "template": template}
    spec |= {"strategy": {"type": "Recreate"}} if volumes else {}  # a ReadWriteOnce volume: one pod at a time
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def operator_test(load: Load, args: list[str], files: bool, volumes: list[dict]) -> dict:
    """The operator's LocustTest (v2): it runs the master headless, starts the test itself and ends
    it (autoquit); our arguments go whole as `extraArgs` (its `command` is split at spaces)."""
    seed = f"--locustfile {LOCUSTFILE}"
    results = ["--results-dir=/results", f"--prometheus-port={METRICS}"]
    master: dict = {"command": seed, "extraArgs": [*args, *results, *load.locust_args], "resources": MASTER_RESOURCES}
    master |= {"autostart": True, "autoquit": {"enabled": True, "timeout": 60}}
    master |= {"labels": _pods(load, f"{load.name}-master")}  # as our own master's: k8s collect waits for it
    spec: dict = {
        "image": load.image,
        "master": master,
        "worker": {"command": seed, "replicas": load.workers, "resources": WORKER_RESOURCES},
        "volumes": volumes,
        "volumeMounts": [{"name": "results", "mountPath": "/results", "target": "master"}],
        "env": {"variables": [HOME]},
        "security": {
            "podSecurityContext": {"fsGroup": USER, "seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": container_context(),
        },
    }
    spec |= {"testFiles": {"configMapRef": f"{load.name}-files"}} if files else {}
    return {"apiVersion": "locust.io/v2", "kind": "LocustTest", "metadata": load.meta(load.name), "spec": spec}
