"""The cluster's side without a cluster, through the official kubernetes client against recorded
Workflow objects served on the loopback (tests/servers/kube_api.py): `llmchaos k8s wait`; the GPU
node's Job script, run by sh with stand-ins for nsenter and nvidia-smi that log what they are asked;
a real Locust run against the reference server with `--k8s-workflow`, its requests labelled by the
steps as the cluster ran them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faults import schedule
from faults.injectors import KINDS
from faults.k8s import phases
from faults.k8s.cluster import Cluster
from faults.k8s.workflow import render
from tests.integration.loadtest_helpers import locust, only_run
from tests.procs import ROOT, serve, wait_for
from tests.servers.kube_api import KubeAPI, running
from tests.unit.faults.k8s.recorded import iso, nodes

CLUSTER = Cluster(run="drills", namespace="staging", selector={"app": "llm"}, gpu_node="gpu-node-1")
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
NSENTER = '#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'  # the node's mount namespace: ours


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
        late = k8s_wait(config, tmp_path, "start")  # it already started: at once
        assert late.wait(30) == 0
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


def gpu_job(tmp_path: Path, config: Path, job: dict, **override: str) -> subprocess.Popen:
    """The Job's container as the node would run it, but with our stand-ins on its PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("nvidia-smi", NVIDIA_SMI), ("nsenter", NSENTER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    container = job["spec"]["template"]["spec"]["containers"][0]
    job_env = {e["name"]: e["value"] for e in container["env"]} | {"NVIDIA_SMI": str(bin_dir / "nvidia-smi")}
    path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    proc = subprocess.Popen(
        container["command"],
        start_new_session=True,
        env=env(config, tmp_path, **job_env, PATH=path, SMI_LOG=str(tmp_path / "smi.log"), **override),
        stderr=subprocess.PIPE,
        text=True,
    )
    JOBS.append(proc)
    return proc


def smi_calls(tmp_path: Path) -> list[tuple[float, str]]:
    log = tmp_path / "smi.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [(float(t), args) for t, _, args in (line.partition(" ") for line in lines)]


@pytest.mark.timing  # the lock within a second of its step's start: the job's start must not be held up
def test_the_gpu_job_resets_locks_while_its_step_runs_and_resets(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU % (2, 500))
    t0 = int(time.time()) + 1
    with running(KubeAPI(workflow, lambda now: nodes(workflow, t0, until=now)), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    calls = smi_calls(tmp_path)
    assert [args for _, args in calls] == [
        "-i 0 --query-supported-clocks=graphics --format=csv,noheader,nounits",
        "-i 0 -rgc",  # whatever a Job that died left, first
        "-i 0 -lgc 500,500",
        "-i 0 -rgc",
    ]
    assert t0 + 2 <= calls[2][0] < t0 + 4  # locked once the step started (read every second)
    assert calls[3][0] >= t0 + 4  # reset at its deadline


def test_the_gpu_job_resets_on_sigterm(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU % (1, "[500, 800]"))  # the seeds' range
    t0 = int(time.time())
    with running(KubeAPI(workflow, lambda now: nodes(workflow, t0, until=now)), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job)
        deadline = time.time() + 30
        while not any("-lgc" in args for _, args in smi_calls(tmp_path)) and time.time() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # the Job deleted, or its activeDeadlineSeconds passed
        assert proc.wait(30) == 143
    assert [args for _, args in smi_calls(tmp_path)][-2:] == ["-i 0 -lgc 500,800", "-i 0 -rgc"]


def test_the_gpu_job_refuses_a_clock_the_gpu_does_not_support(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU % (1, "[500, 5000]"))  # its top beyond this GPU
    with running(KubeAPI(workflow, lambda now: []), tmp_path) as config:
        proc = gpu_job(tmp_path, config, job)
        assert proc.wait(30) == 1
        assert "graphics clock 5000 MHz is not within the supported 210..1980 MHz" in (proc.stderr.read() or "")
    assert [args for _, args in smi_calls(tmp_path)] == [
        "-i 0 --query-supported-clocks=graphics --format=csv,noheader,nounits"
    ]


def test_the_gpu_job_ends_without_a_lock_when_the_workflow_is_deleted_first(tmp_path):
    _, (workflow, job) = rendered(tmp_path, GPU % (100, 500))
    api = KubeAPI(workflow, lambda now: nodes(workflow, int(now), until=now))
    with running(api, tmp_path) as config:
        proc = gpu_job(tmp_path, config, job)
        # deleted once the job's waiter has seen it (not after a guessed 3 s: a busy machine took longer to
        # start it, and a Workflow not there yet is one to wait for)
        read = f"/workflows/{workflow['metadata']['name']}"
        wait_for(lambda: any(path.endswith(read) for path in api.paths), proc, "the job read its Workflow")
        api.workflow = None
        assert proc.wait(30) == 0
    assert "-lgc" not in str(smi_calls(tmp_path))


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

        def answer(self, path: str) -> tuple[int, dict]:
            if not started:
                started.append(int(time.time()) + 3)
                workflow["status"] = {"startTime": iso(started[0])}
            return super().answer(path)

    api = Starting(workflow, lambda now: nodes(workflow, started[0], until=now) if now >= started[0] else [])
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
    assert (windows["jitter"]["actual_start"], windows["jitter"]["actual_end"]) == (t0 + 4, t0 + 7)
    assert (windows["frozen"]["actual_start"], windows["frozen"]["actual_end"]) == (t0 + 6, t0 + 9)
    truth = phases.steps(workflow, nodes(workflow, t0))
    labelled = [(r["phase"], phases.phase(truth, r["intended"])) for r in requests if r["phase"] != "warmup"]
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
