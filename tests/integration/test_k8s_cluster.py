"""The cluster's side without a cluster, through the official kubernetes client against recorded
Workflow objects served on the loopback (tests/servers/kube_api.py): `llmchaos k8s wait`; the GPU
node's Job script, run by sh with stand-ins for chroot and nvidia-smi that log what they are asked,
a node's root and a /proc with the server pod's process in it;
a real Locust run against the reference server with `--k8s-workflow`, its requests labelled by the
steps as the cluster ran them."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from faults import schedule
from faults.injectors import KINDS
from faults.k8s import evidence, sse
from faults.k8s.cluster import Cluster
from faults.k8s.workflow import render
from faults.proxy.wire import CONTROL
from tests.integration.loadtest_helpers import locust, only_run
from tests.procs import ROOT, free_port, serve, stop, wait_for
from tests.servers.chaos_mesh import ChaosMesh
from tests.servers.kube_api import KubeAPI, running
from tests.unit.faults.k8s.recorded import iso, nodes
from tests.unit.faults.k8s.test_phases import replayed

CLUSTER = Cluster(run="drills", namespace="staging", selector={"app": "llm"})
UID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"


def pod(name: str, uid: str, app: str, node: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "staging", "uid": uid, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": app, "image": app}]},
    }


# the server's pod on gpu-node-1 as the API lists it, a replica of it on another node, another app's pod
PODS = [pod("llm-0", UID, "llm", "gpu-node-1"), pod("llm-1", "u1", "llm", "n2"), pod("db-0", "u2", "db", "gpu-node-1")]
GPU = (
    "faults:\n"
    "  - {name: slow-gpu, kind: gpu_clock, target: {gpu: 0}, at: %ds, duration: 2s, params: {graphics_mhz: %s}}\n"
)
NVIDIA_SMI = """#!/bin/sh
echo "$(date +%s.%N) $*" >> "$SMI_LOG"
case "$*" in
  *supported-clocks=graphics*) printf '1980\\n1500\\n510\\n210\\n' ;;
esac
"""
CHROOT = '#!/bin/sh\necho "$1" >> "$CHROOT_LOG"\nshift\nexec "$@"\n'  # the driver's root: ours, with our nvidia-smi


def rendered(tmp_path: Path, text: str) -> tuple[str, list[dict]]:
    path = tmp_path / "drills.yaml"
    path.write_text(text)
    plan = schedule.load(str(path), KINDS)
    return str(path), render(plan, str(path), CLUSTER, plan.end()).run


def env(config: Path, tmp_path: Path, **more: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}  # not in a pod
    return out | {"KUBECONFIG": str(config), "HOME": str(tmp_path)} | more


def k8s_wait(config: Path, tmp_path: Path, until: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "k8s", "wait", "staging/drills", "--step", "slow-gpu", "--for", until],
        cwd=ROOT,
        env=env(config, tmp_path),
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.timing
def test_wait_follows_a_step_through_the_api(tmp_path):
    _, (workflow, _) = rendered(tmp_path, GPU % (2, 500))
    t0 = int(time.time()) + 1
    api = KubeAPI(workflow, lambda now: nodes(workflow, t0, until=now))
    with running(api, tmp_path) as config:
        start, end = k8s_wait(config, tmp_path, "start"), k8s_wait(config, tmp_path, "end")
        assert start.wait(30) == 0
        assert time.time() >= t0 + 2
        assert end.wait(30) == 0
        assert time.time() >= t0 + 4  # its deadline
        late = k8s_wait(config, tmp_path, "start")  # it is over already: never on, at once
        assert late.wait(30) == 1
        api.workflow = None  # deleted
        assert k8s_wait(config, tmp_path, "end").wait(30) == 0
    assert "/apis/chaos-mesh.org/v1alpha1/namespaces/staging/workflownodes" in api.paths


def test_wait_without_a_cluster_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "k8s", "wait", "drills", "--step", "s", "--for", "start"],
        cwd=ROOT,
        env=env(tmp_path / "none", tmp_path),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "no cluster to read" in r.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--selector", "app", "--node", "n"], "--selector: expected KEY=VALUE"),
        (["--selector", "app=llm", "--node", "N_1"], "--node: 'N_1' is not a node's name"),
        (["--selector", "app=llm", "--node", "n", "--index", "-1"], "--index: -1"),
        (["--selector", "app=llm", "--node", "n"], "no cluster to read"),
    ],
)
def test_gpu_with_bad_input_or_no_cluster_is_one_line_and_exit_2(tmp_path, args, said):
    r = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "k8s", "gpu", "staging", *args],
        cwd=ROOT,
        env=env(tmp_path / "none", tmp_path),
        capture_output=True,
        text=True,
    )
    assert (r.returncode, r.stdout) == (2, "")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert said in r.stderr


JOBS: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_job_left():
    """Each GPU job's whole process group (its `llmchaos k8s wait` in the background too) ends with its test."""
    yield
    while JOBS:
        job = JOBS.pop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def node(tmp_path: Path, devices: str = "GPU-aaaa,GPU-bbbb", operator: bool = True) -> dict[str, str]:
    """A GPU node as the Job sees it: its root (the GPU operator's driver root in it, or not) and its
    /proc, where the server pod's process (its UID in its cgroup path, systemd's way) holds `devices`;
    the Job's environment that points there."""
    root, proc = tmp_path / "host", tmp_path / "proc"
    if operator:
        (root / "run/nvidia/driver/usr/bin").mkdir(parents=True)
        (root / "run/nvidia/driver/usr/bin/nvidia-smi").touch()
    root.mkdir(parents=True, exist_ok=True)
    for pid, uid, environ in (
        ("1", "", b"PATH=/sbin\0"),
        ("4242", UID, f"NVIDIA_VISIBLE_DEVICES={devices}\0".encode()),
    ):
        (proc / pid).mkdir(parents=True)
        slice_ = f"kubepods-pod{uid.replace('-', '_')}.slice" if uid else "init.scope"
        (proc / pid / "cgroup").write_text(f"0::/kubepods.slice/{slice_}/cri-containerd-1.scope\n")
        (proc / pid / "environ").write_bytes(b"HOME=/root\0" + environ)
    return {"HOST_ROOT": str(root), "HOST_PROC": str(proc), "NODE_NAME": "gpu-node-1"}


def gpu_job(tmp_path: Path, config: Path, job: dict, **override: str) -> subprocess.Popen:
    """The Job's container as the node would run it, but with our stand-ins on its PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("nvidia-smi", NVIDIA_SMI), ("chroot", CHROOT)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    container = job["spec"]["template"]["spec"]["containers"][0]
    job_env = {e["name"]: e["value"] for e in container["env"] if "value" in e}  # NODE_NAME: the node's
    path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    logs = {"SMI_LOG": str(tmp_path / "smi.log"), "CHROOT_LOG": str(tmp_path / "chroot.log")}
    logs["TERMINATION_LOG"] = str(tmp_path / "termination-log")
    proc = subprocess.Popen(
        container["command"],
        start_new_session=True,
        env=env(config, tmp_path, **(job_env | {"PATH": path} | logs | node(tmp_path) | override)),
        stderr=subprocess.PIPE,
        text=True,
    )
    JOBS.append(proc)
    return proc


def record(tmp_path: Path) -> dict[str, str]:
    """The Job's termination message: the GPU it locked, and when it locked and reset it."""
    log = tmp_path / "termination-log"
    return dict(line.split(" ", 1) for line in log.read_text().splitlines()) if log.exists() else {}


def smi_calls(tmp_path: Path) -> list[tuple[float, str]]:
    log = tmp_path / "smi.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [(float(t), args) for t, _, args in (line.partition(" ") for line in lines)]


def chroots(tmp_path: Path) -> list[str]:
    log = tmp_path / "chroot.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.timing  # the lock within a second of its step's start: the job's start must not be held up
def test_the_gpu_job_resets_locks_the_server_pods_gpu_while_its_step_runs_and_resets(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU % (2, 500))
    t0 = int(time.time()) + 1
    with running(KubeAPI(workflow, lambda now: nodes(workflow, t0, until=now), PODS), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    calls = smi_calls(tmp_path)
    assert [args for _, args in calls] == [  # by the UUID of the GPU the server's pod holds: its first
        "-i GPU-aaaa --query-supported-clocks=graphics --format=csv,noheader,nounits",
        "-i GPU-aaaa -rgc",  # whatever a Job that died left, first
        "-i GPU-aaaa -lgc 500,500",
        "-i GPU-aaaa -rgc",
    ]
    assert set(chroots(tmp_path)) == {f"{tmp_path}/host/run/nvidia/driver"}  # the GPU operator's driver root
    assert t0 + 2 <= calls[2][0] < t0 + 4  # locked once the step started (read every second)
    assert calls[3][0] >= t0 + 4  # reset at its deadline
    done = record(tmp_path)
    assert done["gpu"] == "GPU-aaaa"
    assert calls[2][0] <= float(done["locked"]) <= calls[3][0]  # once -lgc returned, before the reset
    assert calls[3][0] <= float(done["reset"])


@pytest.mark.parametrize(
    ("override", "root"),
    [
        ({}, "/run/nvidia/driver"),  # auto, on a GPU operator's node
        ({"DRIVER_ROOT": "/home/kubernetes/bin/nvidia"}, "/home/kubernetes/bin/nvidia"),  # given
        ({"ACCESS": "runtime-class"}, None),  # the NVIDIA runtime mounted nvidia-smi into the container
    ],
)
def test_the_gpu_job_reaches_the_driver_where_it_is(tmp_path, override, root):
    _, (workflow, job) = rendered(tmp_path, GPU % (1, "[500, 5000]"))  # its top beyond this GPU: it stops there
    with running(KubeAPI(workflow, lambda now: [], PODS), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job, **override)
        assert proc.wait(30) == 1
        assert "graphics clock 5000 MHz is not within the supported 210..1980 MHz" in (proc.stderr.read() or "")
    assert [args for _, args in smi_calls(tmp_path)] == [
        "-i GPU-aaaa --query-supported-clocks=graphics --format=csv,noheader,nounits"
    ]
    assert chroots(tmp_path) == ([f"{tmp_path}/host{root}"] if root else [])
    assert "locked" not in record(tmp_path)


def test_the_gpu_job_chroots_into_the_nodes_root_where_no_operator_put_a_driver_root(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU % (1, "[500, 5000]"))
    with running(KubeAPI(workflow, lambda now: [], PODS), tmp_path) as config:
        hosts_driver = node(tmp_path / "plain", operator=False)
        assert gpu_job(tmp_path, config, job, **hosts_driver).wait(30) == 1
    assert chroots(tmp_path) == [f"{tmp_path}/plain/host/"]


@pytest.mark.parametrize(
    ("devices", "pods", "smi", "said"),
    [  # the pod's second GPU; indices (a runtime set so) used as they are, with a warning; no pod there
        ("GPU-aaaa,MIG-cccc/1/0", PODS, "-i MIG-cccc/1/0", ""),
        ("3,5", PODS, "-i 5", "pod llm-0 lists GPU '5', not a UUID: used as nvidia-smi's index"),
        ("GPU-aaaa", PODS, None, "pod llm-0 holds 1 GPUs (GPU-aaaa): no gpu 1"),
        ("GPU-aaaa", PODS[1:], None, "no pod of the selector on this node"),
    ],
)
def test_the_gpu_job_finds_the_gpu_by_the_pods_own_list(tmp_path, devices, pods, smi, said):
    _, (workflow, job) = rendered(tmp_path, (GPU % (1, "[500, 5000]")).replace("{gpu: 0}", "{gpu: 1}"))
    with running(KubeAPI(workflow, lambda now: [], pods), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job, **node(tmp_path / "n", devices))
        assert proc.wait(30) == 1
        stderr = proc.stderr.read() if proc.stderr else ""
    assert said in stderr
    calls = [args for _, args in smi_calls(tmp_path)]
    assert calls == ([f"{smi} --query-supported-clocks=graphics --format=csv,noheader,nounits"] if smi else [])


def test_the_gpu_job_without_the_nodes_processes_says_so_and_locks_nothing(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU % (1, 500))  # hostPID missing: no node /proc to read
    with running(KubeAPI(workflow, lambda now: [], PODS), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job, HOST_PROC=str(tmp_path / "no-proc"))
        assert proc.wait(30) == 1
        stderr = proc.stderr.read() if proc.stderr else ""
    assert "cannot list the node's processes" in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert smi_calls(tmp_path) == []


def test_the_gpu_job_resets_on_sigterm(tmp_path):
    # the seeds' range; a step long enough that a busy machine's slow start still finds it on
    _, (workflow, job) = rendered(tmp_path, GPU.replace("duration: 2s", "duration: 60s") % (1, "[500, 800]"))
    t0 = int(time.time())
    with running(KubeAPI(workflow, lambda now: nodes(workflow, t0, until=now), PODS), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job)
        wait_for(lambda: "locked" in record(tmp_path), proc, "the job locked the GPU")  # and recorded it
        proc.send_signal(signal.SIGTERM)  # the Job deleted, or its activeDeadlineSeconds passed
        assert proc.wait(30) == 143
    assert [args for _, args in smi_calls(tmp_path)][-2:] == ["-i GPU-aaaa -lgc 500,800", "-i GPU-aaaa -rgc"]
    assert {"locked", "reset"} <= set(record(tmp_path))


def test_the_gpu_job_resets_when_the_workflow_is_aborted(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU.replace("duration: 2s", "duration: 600s") % (1, 500))
    t0 = int(time.time())
    with running(KubeAPI(workflow, lambda now: nodes(workflow, t0, until=now), PODS), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job)
        wait_for(lambda: "locked" in record(tmp_path), proc, "the job locked the GPU")
        aborted = time.time()
        workflow["metadata"]["annotations"]["workflow.chaos-mesh.org/abort"] = "true"  # `kubectl annotate`
        assert proc.wait(30) == 0
    assert [args for _, args in smi_calls(tmp_path)][-1] == "-i GPU-aaaa -rgc"
    assert aborted < float(record(tmp_path)["reset"]) < t0 + 60  # at the abort, not at the step's deadline


def test_the_gpu_job_ends_without_a_lock_when_the_workflow_is_deleted_first(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU % (100, 500))
    api = KubeAPI(workflow, lambda now: nodes(workflow, int(now), until=now), PODS)
    with running(api, tmp_path) as config:
        proc = gpu_job(tmp_path, config, job)
        # deleted once the job's waiter has seen it (not after a guessed 3 s: a busy machine took longer to
        # start it, and a Workflow not there yet is one to wait for)
        read = f"/workflows/{workflow['metadata']['name']}"
        wait_for(lambda: any(path.endswith(read) for path in api.paths), proc, "the job read its Workflow")
        api.workflow = None
        assert proc.wait(30) == 0
    assert "-lgc" not in str(smi_calls(tmp_path))
    assert "locked" not in record(tmp_path)


SCHEDULE = """\
faults:
  - {name: jitter, kind: netem, target: {interface: eth0}, at: 4s, duration: 3s, params: {delay: 100ms}}
  - {name: frozen, kind: docker, target: {label: "app=llm"}, at: 6s, duration: 3s,
     params: {action: pause, cluster: partition}}
"""


@pytest.mark.timing
@pytest.mark.integration
def test_a_load_test_labels_its_requests_by_the_steps_the_cluster_ran(tmp_path, monkeypatch):
    _, (workflow, *_) = rendered(tmp_path, SCHEDULE)
    started: list[int] = []

    class Starting(KubeAPI):
        """The Workflow starts 3 s after Locust first reads it (however long Locust took to start)."""

        def answer(self, path: str, query: dict[str, list[str]] | None = None) -> tuple[int, dict]:
            if not started:
                started.append(int(time.time()) + 3)
                workflow["status"] = {"startTime": iso(started[0])}
            return super().answer(path, query)

    def mesh() -> ChaosMesh:  # the fake controller, once the Workflow has started
        return ChaosMesh(workflow, started[0])

    api = Starting(
        workflow,
        lambda now: mesh().nodes(now) if now >= started[0] else [],
        objects=lambda now: mesh().objects(now) if now >= started[0] else [],
    )
    with serve("--sim-time-scale", "0.2") as server, running(api, tmp_path) as config:
        monkeypatch.setenv("KUBECONFIG", str(config))
        proc = locust(
            "--host", server.url, "--results-dir", str(tmp_path / "results"), "-u", "6", "-r", "6", "-t", "14s",
            "--langs", "en,de", "--max-tokens", "8", "--k8s-workflow", "staging/drills",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path / "results")
    assert run["config"]["k8s_workflow"] == "staging/drills"
    (t0,) = started
    windows = {w["name"]: w for w in run["faults"]}
    # from each chaos's Apply, a second into its step, to its step's deadline
    assert (windows["jitter"]["actual_start"], windows["jitter"]["actual_end"]) == (t0 + 5, t0 + 7)
    assert (windows["frozen"]["actual_start"], windows["frozen"]["actual_end"]) == (t0 + 7, t0 + 9)
    lists = [(path, q) for path, q in api.queries if not path.endswith("/workflows/drills")]
    assert {path.rsplit("/", 1)[1] for path, _ in lists} == {"workflownodes", "networkchaos", "podchaos", "pods"}
    assert all(q["labelSelector"] == ["chaos-mesh.org/workflow=drills"] for _, q in lists)  # never the namespace's all
    truth = replayed(workflow, t0, t0 + 20)  # the same cluster read every second
    labelled = [(r["phase"], truth.phase(r["intended"])) for r in requests if r["phase"] != "warmup"]
    assert labelled
    assert [got for got, _ in labelled] == [want for _, want in labelled]
    assert {"baseline", "jitter", "frozen", "frozen+jitter"} >= {got for got, _ in labelled} >= {"jitter", "frozen"}
    report = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "report", str(next((tmp_path / "results").iterdir()))],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "phases: from the cluster, Chaos Mesh Workflow staging/drills's steps" in report.stdout


SSE = (
    "faults:\n"
    '  - {name: chunk-drop, kind: sse, target: {proxy: "127.0.0.1:%d"}, at: 0s, duration: 2s,\n'
    "     params: {drop_ratio: 0.5}}\n"
)


def test_a_task_step_leaves_the_window_it_ran_for_the_reader(tmp_path):
    """The Task step's own container command (a real `faults run` on its one-window file) against a
    real proxy: the termination message it leaves is the window as the proxy had it, which the
    reader takes over the container's start."""
    data, control = free_port(), free_port()
    path = tmp_path / "drills.yaml"
    path.write_text(SSE % data)
    plan = schedule.load(str(path), KINDS)
    made = render(plan, str(path), dataclasses.replace(CLUSTER, upstream="http://llm:8000"), plan.end())
    objects = made.setup + made.run
    (workflow,) = [o for o in objects if o["kind"] == "Workflow"]
    (task,) = [t for t in workflow["spec"]["templates"] if t.get("templateType") == "Task"]
    (windows,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "drills-windows"]
    mount = tmp_path / "windows"
    mount.mkdir()
    for name, text in windows["data"].items():  # the proxy's Service, here on loopback
        (mount / name).write_text(text.replace(f"drills-proxy-{data}:{sse.CONTROL_PORT}", f"127.0.0.1:{control}"))
    log = tmp_path / "termination-log"
    command = [
        str(log) if c == sse.TERMINATION_LOG else c.replace(sse.MOUNT, str(mount))
        for c in task["task"]["container"]["command"]
    ]
    assert command[:3] == ["llmchaos", "faults", "run"]
    listen = ["--listen", f"127.0.0.1:{data}", "--control-listen", f"127.0.0.1:{control}"]
    proxy = subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "proxy", *listen, "--upstream", "http://127.0.0.1:9"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[tuple[float, bool]] = []  # (when asked, the proxy's fault on when it answered)
    try:
        url = f"http://127.0.0.1:{control}{CONTROL}"
        wait_for(lambda: _answers(url), proxy, "the proxy's control API")
        launched = time.time()
        no_cluster = env(tmp_path / "no-kubeconfig", tmp_path)  # faults run reads none
        run = subprocess.Popen([sys.executable, "-m", "llmchaos.cli", *command[1:]], cwd=ROOT, env=no_cluster)
        while run.poll() is None:
            asked = time.time()
            seen.append((asked, httpx.get(url).json()["active"]))
            time.sleep(0.02)
        assert run.returncode == 0
    finally:
        stop(proxy)
    ended = {"startedAt": iso(launched), "exitCode": 0, "message": log.read_text()}
    found = evidence.task({"status": {"containerStatuses": [{"state": {"terminated": ended}}]}})
    assert found is not None
    assert found.applied is not None
    assert found.recovered is not None
    assert found.started is not None
    assert found.started <= launched
    # The runner stamps each change once the proxy said it was done: after the last answer that had
    # it otherwise was asked for. The proxy answered off for a while after the command began (its
    # interpreter, the run's lead): the container's start is not the window's.
    first_on = next(i for i, (_, active) in enumerate(seen) if active)
    off_before = [t for t, active in seen[:first_on] if not active]
    assert off_before
    assert off_before[-1] < found.applied
    last_on = max(i for i, (_, active) in enumerate(seen) if active)
    assert seen[last_on][0] < found.recovered
    assert all(active for _, active in seen[first_on : last_on + 1])  # one window, on throughout


def _answers(url: str) -> bool:
    try:
        return httpx.get(url).status_code == 200
    except httpx.TransportError:
        return False
