"""`llmchaos k8s render-load`: a Locust master and workers (or a LocustTest) whose core objects an
API server takes, wired to the files, the results' volume, the Pushgateway and the Workflow."""

import subprocess

import pytest
import yaml

from tests.inprocess import llmchaos
from tests.unit.faults.k8s.schemas import errors

SLO = "en: {ttft_p99_ms: 100}\n"


def render_load(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    return llmchaos(capsys, "k8s", "render-load", *args)


def test_master_workers_files_results_and_the_workflow_reader(tmp_path, capsys):
    slo = tmp_path / "slo.yaml"
    slo.write_text(SLO)
    r = render_load(
        capsys,
        "--host", "http://drill-proxy-9100:9100", "--namespace", "staging", "--workers", "3",
        "--slo", str(slo), "--push-gateway", "http://pushgateway:9091",
        "--k8s-workflow", "drill", "--", "--langs", "en,de",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    objects = list(yaml.safe_load_all(r.stdout))
    assert [e for o in objects for e in errors(o)] == []
    kinds = {o["kind"]: o for o in objects if o["kind"] != "Deployment"}
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    assert set(kinds) == {"ConfigMap", "ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim", "Service"}
    master = deployments["llmchaos-load-master"]["spec"]["template"]["spec"]
    command = master["containers"][0]["command"]
    assert command[:4] == ["locust", "-f", "/src/loadtests/locustfile.py", "--master"]
    for arg in (
        "--host=http://drill-proxy-9100:9100",
        "--slo=/etc/llmchaos/slo.yaml",
        "--push-gateway=http://pushgateway:9091",
        "--k8s-workflow=staging/drill",
        "--results-dir=/results",
    ):
        assert arg in command
    assert command[-2:] == ["--langs", "en,de"]
    assert master["serviceAccountName"] == "llmchaos-load-phases"
    worker = deployments["llmchaos-load-worker"]["spec"]
    assert worker["replicas"] == 3
    assert "--master-host=llmchaos-load-master" in worker["template"]["spec"]["containers"][0]["command"]
    assert kinds["Role"]["rules"][0]["verbs"] == ["get", "list"]
    assert kinds["ConfigMap"]["data"] == {"slo.yaml": SLO}
    assert deployments["llmchaos-load-master"]["spec"]["strategy"] == {"type": "Recreate"}  # its volume is RWO


def test_the_operators_locust_test(tmp_path, capsys):
    r = render_load(
        capsys, "--host", "http://llm:8000", "--operator", "--k8s-workflow", "drill", "--workers", "2",
        "--", "--tags", "a b",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    objects = list(yaml.safe_load_all(r.stdout))
    test = objects[-1]
    assert (test["apiVersion"], test["kind"]) == ("locust.io/v2", "LocustTest")
    spec = test["spec"]
    assert spec["worker"]["replicas"] == 2
    assert spec["master"]["command"] == spec["worker"]["command"] == "--locustfile /src/loadtests/locustfile.py"
    assert spec["master"]["extraArgs"][0] == "--host=http://llm:8000"
    assert spec["master"]["extraArgs"][-2:] == ["--tags", "a b"]  # whole: extraArgs are not split at spaces
    assert "--results-dir=/results" in spec["master"]["extraArgs"]
    assert spec["volumeMounts"] == [{"name": "results", "mountPath": "/results", "target": "master"}]
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "llmchaos-load-results"
    assert "PersistentVolumeClaim" in [o["kind"] for o in objects]
    assert spec["security"]["containerSecurityContext"]["runAsNonRoot"] is True
    # labelled as render-load's own master, so k8s collect waits for it to end
    assert spec["master"]["labels"]["app.kubernetes.io/instance"] == "llmchaos-load-master"
    binding = next(o for o in objects if o["kind"] == "RoleBinding")
    assert binding["subjects"][0]["name"] == "default"  # the operator's pods' account
    assert [e for o in objects[:-1] for e in errors(o)] == []


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--host", "http://x", "--results-size", "lots"], "--results-size"),
        (["--host", "http://x", "--storage-class", "Fast_SSD"], "--storage-class"),
        (["--host", "http://x", "--gpu-namespace", "llmchaos-gpu"], "--gpu-namespace: the GPU Jobs' records"),
        (["--host", "http://x", "--name", "Load"], "--name"),
        (["--host", "http://x", "--slo", "/nonexistent/slo.yaml"], "/nonexistent/slo.yaml"),
        (["--host", "http://x", "--slo", "compose/schedules/drill-jitter.yaml"], "unknown language"),
        (
            ["--host", "http://x", "--k8s-workflow", "d", "--schedule", "compose/schedules/example.yaml"],
            "--k8s-workflow",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, named, capsys):
    r = render_load(capsys, *args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert named in r.stderr


def test_a_broken_schedule_is_refused_before_anything_is_rendered(tmp_path, capsys):
    bad = tmp_path / "s.yaml"
    bad.write_text("faults:\n  - {name: x, kind: plague, target: {a: b}, at: 0s, duration: 1s}\n")
    r = render_load(capsys, "--host", "http://x", "--schedule", str(bad))
    assert r.returncode == 2
    assert "faults[0].kind" in r.stderr
    assert r.stdout == ""
