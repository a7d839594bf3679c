"""An unattended load run on a cluster, without a cluster: `k8s render-load --headless` renders Jobs;
their containers' own commands run as the pods would (real Locust, a master and a worker, against
the reference server; the pods' network as the loopback and the results volume as a directory);
`k8s collect` brings the results home through a fake API (tests/servers/kube_api.py: the volume's
claim, the master's pod, the reading pod created and deleted) with a stand-in for the exec stream
the fake cannot serve (it runs the same command, the volume mounted where it asks); and `llmchaos
report` reads what came home."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from faults.k8s import collect
from llmchaos.errors import UsageError
from tests.procs import ROOT, free_port, serve
from tests.servers.kube_api import KubeAPI, running

NS = "staging"


def render(tmp_path: Path, url: str, *locust: str) -> dict[str, dict]:
    out = tmp_path / "k8s"
    r = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "k8s", "render-load", "--host", url, "--name", "nightly",
         "--namespace", NS, "--workers", "1", "--storage-class", "fast-ssd", "--out", str(out), "--", *locust],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in yaml.safe_load_all((out / "load.yaml").read_text())}


def as_pod(command: list[str], volume: Path, port: int, metrics: int) -> list[str]:
    """A container's command as its pod runs it, here: its files at the checkout's, its volume a
    directory, the master's Service the loopback (each pod has its own ports; here they are shared)."""
    out = []
    for arg in command:
        arg = arg.replace("/src/", f"{ROOT}/").replace("--results-dir=/results", f"--results-dir={volume}")
        arg = arg.replace("--master-host=nightly-master", "--master-host=127.0.0.1")
        out.append(arg.replace("--prometheus-port=9646", f"--prometheus-port={metrics}"))
    assert out[0] == "locust"
    role = ["--master-bind-port", str(port)] if "--master" in out else ["--master-port", str(port)]
    return [sys.executable, "-m", "locust", *out[1:], *role]


def stand_in_exec(volume: Path):
    """The exec stream, stood in for: the command run here, with the pod's mount at `volume`."""

    def run(core: object, namespace: str, pod: str, command: list[str]) -> str:
        assert (namespace, pod) == (NS, "nightly-collect")
        local = [c.replace(collect.MOUNT, str(volume)) for c in command]
        return subprocess.run(local, capture_output=True, text=True, check=True).stdout

    return run


def test_a_headless_run_goes_from_jobs_to_collect_to_report(tmp_path, monkeypatch):
    volume = tmp_path / "pvc"
    volume.mkdir()
    with serve("--sim-time-scale", "0.2") as server:
        objects = render(tmp_path, server.url, "--headless", "-u", "2", "-r", "2", "-t", "4s", "--langs", "en",
                         "--max-tokens", "8")  # fmt: skip
        master, worker = objects["Job/nightly-master"], objects["Job/nightly-worker"]
        for job in (master, worker):
            assert job["spec"]["backoffLimit"] == 0  # a second master would be another test
            assert job["spec"]["ttlSecondsAfterFinished"] > 0
            assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
        assert worker["spec"]["parallelism"] == worker["spec"]["completions"] == 1
        (box,) = master["spec"]["template"]["spec"]["containers"]
        assert box["readinessProbe"]["tcpSocket"] == {"port": "master"}  # no web UI when headless
        assert "--expect-workers=1" in box["command"]
        assert objects["PersistentVolumeClaim/nightly-results"]["spec"]["storageClassName"] == "fast-ssd"
        assert {p["name"] for p in objects["Service/nightly-master"]["spec"]["ports"]} == {"master", "metrics"}
        port, metrics = free_port(), free_port()
        (worker_box,) = worker["spec"]["template"]["spec"]["containers"]
        pods = [
            subprocess.Popen(as_pod(c["command"], volume, port, metrics), cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
            for c in (worker_box, box)
        ]  # fmt: skip
        try:
            assert pods[1].wait(120) == 0, pods[1].stderr.read() if pods[1].stderr else ""
            assert pods[0].wait(30) == 0  # the worker ends with its master: its Job completes
        finally:
            for p in pods:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    claim = {"kind": "PersistentVolumeClaim", "metadata": {"name": "nightly-results", "namespace": NS}, "spec": {}}
    ended = {  # the master's pod, its Job complete
        "kind": "Pod",
        "metadata": {"name": "nightly-master-x2k9f", "namespace": NS, "labels": box_labels(master)},
        "spec": {"containers": [{"name": "master", "image": "llmchaos:0.1.0"}]},
        "status": {"phase": "Succeeded"},
    }
    api = KubeAPI(None, lambda now: [], [claim, ended])
    with running(api, tmp_path) as config:
        monkeypatch.setenv("KUBECONFIG", str(config))
        home = tmp_path / "home"
        (found,) = collect.collect(NS, "nightly", home, "llmchaos:0.1.0", run_exec=stand_in_exec(volume))
    assert "POST /api/v1/namespaces/staging/pods" in api.paths
    assert "DELETE /api/v1/namespaces/staging/pods/nightly-collect" in api.paths  # the reading pod, gone
    assert [p for p in api.pods if p["metadata"]["name"] == "nightly-collect"] == []
    (original,) = [p for p in volume.iterdir() if p.is_dir()]
    assert found == home / original.name
    assert sorted(f.name for f in found.iterdir()) == sorted(f.name for f in original.iterdir())
    report = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "report", str(found)], cwd=ROOT, capture_output=True, text=True
    )
    assert report.returncode == 0, report.stderr
    assert "en" in report.stdout


def box_labels(job: dict) -> dict:
    return job["spec"]["template"]["metadata"]["labels"]


def test_collect_refuses_while_the_master_runs_and_without_a_volume(tmp_path, monkeypatch):
    running_master = {
        "kind": "Pod",
        "metadata": {"name": "nightly-master-x2k9f", "namespace": NS,
                     "labels": {"app.kubernetes.io/instance": "nightly-master"}},
        "spec": {"containers": [{"name": "master", "image": "llmchaos:0.1.0"}]},
        "status": {"phase": "Running"},
    }  # fmt: skip
    claim = {"kind": "PersistentVolumeClaim", "metadata": {"name": "nightly-results", "namespace": NS}, "spec": {}}
    api = KubeAPI(None, lambda now: [], [claim, running_master])
    with running(api, tmp_path) as config:
        monkeypatch.setenv("KUBECONFIG", str(config))
        with pytest.raises(UsageError, match=r"still running \(nightly-master-x2k9f\)"):
            collect.collect(NS, "nightly", tmp_path / "home", "llmchaos:0.1.0", run_exec=stand_in_exec(tmp_path))
        with pytest.raises(UsageError, match="no results volume staging/other-results"):
            collect.collect(NS, "other", tmp_path / "home", "llmchaos:0.1.0", run_exec=stand_in_exec(tmp_path))
    assert not any(p.startswith("POST") for p in api.paths)  # nothing created


def test_collect_refuses_when_a_reading_pod_is_there_already(tmp_path, monkeypatch):
    claim = {"kind": "PersistentVolumeClaim", "metadata": {"name": "nightly-results", "namespace": NS}, "spec": {}}
    left = {  # a collect killed half-way left its pod
        "kind": "Pod",
        "metadata": {"name": "nightly-collect", "namespace": NS, "labels": {}},
        "spec": {"containers": [{"name": "results", "image": "llmchaos:0.1.0"}]},
        "status": {"phase": "Running"},
    }
    api = KubeAPI(None, lambda now: [], [claim, left])
    with running(api, tmp_path) as config:
        monkeypatch.setenv("KUBECONFIG", str(config))
        with pytest.raises(UsageError, match=r"pod staging/nightly-collect exists: .*kubectl -n staging delete pod"):
            collect.collect(NS, "nightly", tmp_path / "home", "llmchaos:0.1.0", run_exec=stand_in_exec(tmp_path))
    assert [p["metadata"]["name"] for p in api.pods if p["kind"] == "Pod"] == ["nightly-collect"]  # not ours: kept


def packed(tmp_path: Path) -> str:
    """A results directory with one run, as the reading pod's command sends it."""
    (tmp_path / "pvc" / "20261207T010203").mkdir(parents=True)
    (tmp_path / "pvc" / "20261207T010203" / "run.json").write_text("{}")
    return stand_in_exec(tmp_path / "pvc")(None, NS, "nightly-collect", collect.TAR)


def test_damaged_results_or_a_destination_taken_are_one_line(tmp_path):
    with pytest.raises(UsageError, match="the results came back damaged"):
        collect.unpack("bm90IGEgdGFy", tmp_path)  # base64 of "not a tar"
    with pytest.raises(UsageError, match="the results came back damaged"):
        collect.unpack("\x00\xff not base64 at all", tmp_path)
    text = packed(tmp_path)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(UsageError, match="cannot write the results"):
        collect.unpack(text, tmp_path / "a-file")  # DIR is a file
    home = tmp_path / "home"
    assert collect.unpack(text, home) == [home / "20261207T010203"]
    with pytest.raises(UsageError, match="20261207T010203 exists: collect into another directory"):
        collect.unpack(text, home)  # never mixed into a run already there


def test_collect_without_a_cluster_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "k8s", "collect", "staging/nightly", str(tmp_path / "home")],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")},
        capture_output=True,
        text=True,
    )
    assert (r.returncode, r.stdout) == (2, "")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no cluster to read" in r.stderr
