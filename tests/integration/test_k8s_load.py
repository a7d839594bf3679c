"""An unattended load run on a cluster, without a cluster: `k8s render-load --headless` renders Jobs;
their containers' own commands run as the pods would (real Locust, a master and a worker, against
the reference server; the pods' network as the loopback and the results volume as a directory);
`k8s collect` brings the results home through a fake API (tests/servers/kube_api.py: the volume's
claim, the master's pod, the reading pod created and deleted) with a stand-in for the exec stream
the fake cannot serve (it runs the same command, the volume mounted where it asks); and `llmchaos
report` reads what came home."""

from __future__ import annotations

import base64
import io
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

    def run(core: object, namespace: str, pod: str, command: list[str], stdout: collect.Sink) -> None:
        assert (namespace, pod) == (NS, "nightly-collect")
        local = [c.replace(collect.MOUNT, str(volume)) for c in command]
        with subprocess.Popen(local, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            while chunk := proc.stdout.read(997):  # in pieces that split base64's groups and lines, as frames do
                stdout(chunk)
        assert proc.returncode == 0

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
    """A results directory with one run, as the reading pod's command sends it (base64 text)."""
    (tmp_path / "pvc" / "20261207T010203").mkdir(parents=True)
    (tmp_path / "pvc" / "20261207T010203" / "run.json").write_text("{}")
    got: list[str] = []
    stand_in_exec(tmp_path / "pvc")(None, NS, "nightly-collect", collect.TAR, got.append)
    return "".join(got)


def decoded(text: str) -> io.BytesIO:
    out = io.BytesIO()
    sink = collect.Base64Sink(out)
    sink(text)
    sink.close()
    out.seek(0)
    return out


def test_results_damaged_on_the_way_leave_nothing_and_no_pod(tmp_path, monkeypatch):
    claim = {"kind": "PersistentVolumeClaim", "metadata": {"name": "nightly-results", "namespace": NS}, "spec": {}}
    api = KubeAPI(None, lambda now: [], [claim])
    text = packed(tmp_path)

    def damaged(core: object, namespace: str, pod: str, command: list[str], stdout: collect.Sink) -> None:
        stdout(text[:200])
        stdout("%%% a proxy's error page %%%")

    with running(api, tmp_path) as config:
        monkeypatch.setenv("KUBECONFIG", str(config))
        for run_exec in (damaged, lambda *a: a[-1](text[:-2])):  # not base64; cut short
            with pytest.raises(UsageError, match="the results came back damaged"):
                collect.collect(NS, "nightly", tmp_path / "home", "llmchaos:0.1.0", run_exec=run_exec)
    assert not (tmp_path / "home").exists()
    assert api.paths.count("DELETE /api/v1/namespaces/staging/pods/nightly-collect") == 2
    assert [p for p in api.pods if p["kind"] == "Pod"] == []
    assert list(tmp_path.glob("tmp*")) == []  # the decoded file beside DIR, gone


def test_results_with_nowhere_to_go_are_one_line_and_leave_no_pod(tmp_path, monkeypatch):
    claim = {"kind": "PersistentVolumeClaim", "metadata": {"name": "nightly-results", "namespace": NS}, "spec": {}}
    api = KubeAPI(None, lambda now: [], [claim])
    with running(api, tmp_path) as config:
        monkeypatch.setenv("KUBECONFIG", str(config))
        with pytest.raises(UsageError, match="cannot write the results"):  # no file can be made there
            collect.collect(NS, "nightly", Path("/proc/results"), "llmchaos:0.1.0", run_exec=stand_in_exec(tmp_path))
        assert not any(p.startswith("POST") for p in api.paths)  # checked before any pod
        volume = tmp_path / "pvc"
        packed(tmp_path)
        monkeypatch.setattr(collect.tempfile, "TemporaryFile", lambda dir: open("/dev/full", "w+b", buffering=0))  # noqa: SIM115
        with pytest.raises(UsageError, match="cannot write the results: No space left on device"):  # a full disk
            collect.collect(NS, "nightly", tmp_path / "home", "llmchaos:0.1.0", run_exec=stand_in_exec(volume))
    assert "DELETE /api/v1/namespaces/staging/pods/nightly-collect" in api.paths  # the reading pod, gone
    assert not (tmp_path / "home").exists()


def test_base64_in_any_pieces_decodes_as_a_whole_and_bad_base64_is_refused():
    data = bytes(range(256)) * 7
    text = base64.encodebytes(data).decode()  # lines of 76, as base64(1) writes them
    for size in (1, 3, 5, 76, 77, 1000):
        out = io.BytesIO()
        sink = collect.Base64Sink(out)
        for i in range(0, len(text), size):
            sink(text[i : i + size])
        sink.close()
        assert out.getvalue() == data, size
    sink = collect.Base64Sink(io.BytesIO())
    sink(text[:-3])
    with pytest.raises(ValueError, match="cut short"):
        sink.close()
    with pytest.raises(ValueError, match="ASCII"):
        collect.Base64Sink(io.BytesIO())("\x00\xff not base64 at all")
    with pytest.raises(ValueError, match="base64"):  # binascii's own: Only base64 data is allowed
        collect.Base64Sink(io.BytesIO())("%%% a proxy's error page %%%")


def test_damaged_results_or_a_destination_taken_are_one_line(tmp_path):
    with pytest.raises(UsageError, match="the results came back damaged"):
        collect.unpack(decoded("bm90IGEgdGFy"), tmp_path)  # base64 of "not a tar"
    text = packed(tmp_path)
    raw = bytearray(decoded(text).getvalue())
    raw[len(raw) // 2] ^= 0xFF  # a byte of the compressed stream flipped
    with pytest.raises(UsageError, match="the results came back damaged"):
        collect.unpack(io.BytesIO(bytes(raw)), tmp_path / "damaged")
    with pytest.raises(UsageError, match="the results came back damaged"):
        collect.unpack(io.BytesIO(bytes(raw[: len(raw) // 2])), tmp_path / "cut")  # cut off half-way
    (tmp_path / "a-file").write_text("")
    with pytest.raises(UsageError, match="cannot write the results"):
        collect.unpack(decoded(text), tmp_path / "a-file")  # DIR is a file
    home = tmp_path / "home"
    assert collect.unpack(decoded(text), home) == [home / "20261207T010203"]
    with pytest.raises(UsageError, match="20261207T010203 exists: collect into another directory"):
        collect.unpack(decoded(text), home)  # never mixed into a run already there


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
