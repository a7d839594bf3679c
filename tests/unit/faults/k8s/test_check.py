"""`llmchaos k8s check`: rendered objects are admitted; each reason an API server or Chaos Mesh's
webhooks would refuse one is a line naming the file, the object's line, the object and the field, and
exit 1; a file that is no YAML of objects, CRDs that are none, or an unknown release is one line and
exit 2, with nothing checked."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.inprocess import llmchaos
from tests.unit.faults.k8s.schemas import crd_dir

GOLDEN = Path(__file__).parent / "golden"
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "staging"}}


def check(capsys: pytest.CaptureFixture[str], *args: str):
    return llmchaos(capsys, "k8s", "check", *args)


def dump(path: Path, *docs: object) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return str(path)


def test_the_rendered_drills_are_admitted(capsys):
    drills = sorted(str(p) for p in GOLDEN.glob("*.yaml"))
    r = check(capsys, *drills, "--crds", str(crd_dir()))
    assert r.returncode == 0, r.stdout + r.stderr
    count = sum(len(list(yaml.safe_load_all(Path(p).read_text()))) for p in drills)
    assert r.stdout.splitlines() == [
        f"llmchaos k8s check: {count} objects, 0 refused (Kubernetes 1.30, 7 kinds from CRDs)"
    ]


def test_each_refusal_names_file_line_object_and_field(capsys, tmp_path):
    workflow = next(yaml.safe_load_all((GOLDEN / "drill-jitter.yaml").read_text()))
    typed = copy.deepcopy(workflow)
    chaos = next(t for t in workflow["spec"]["templates"] if "networkChaos" in t)
    chaos["networkChaos"]["duration"] = "20s"  # the Workflow webhook's rule
    typed["metadata"]["name"] = "typed"
    next(t for t in typed["spec"]["templates"] if "networkChaos" in t)["networkChaos"]["delay"]["latency"] = 100
    bad_meta = {**CONFIGMAP, "metadata": {"name": "Big_Name", "labels": {"a/b/c": "x"}}}
    docs = (CONFIGMAP, workflow, typed, {**CONFIGMAP, "data": {"k": 1}}, bad_meta)
    path = dump(tmp_path / "objects.yaml", *docs)
    r = check(capsys, path, "--crds", str(crd_dir()))
    assert r.returncode == 1, r.stdout + r.stderr
    at = [f"{path}:{i + 1}: " for i, text in enumerate(Path(path).read_text().splitlines()) if text[:4] == "apiV"]
    detail = "should not define duration in chaos when using Workflow, use Template#Deadline instead."
    # the schema and ObjectMeta first; the webhook only for an object that passed them (as the server goes)
    assert r.stdout.splitlines() == [
        f"{at[1]}Workflow/drill-jitter: spec.templates[3]: Invalid value: 20s: {detail}",
        f"{at[2]}Workflow/typed: spec.templates.3.networkChaos.delay.latency: 100 is not of type 'string'",
        f"{at[3]}ConfigMap/c: data.k: 1 is not of type 'string', 'null'",
        f"{at[4]}ConfigMap/Big_Name: metadata.name: Invalid value: 'Big_Name': not a DNS subdomain (RFC 1123)",
        f"{at[4]}ConfigMap/Big_Name: metadata.labels: Invalid value: 'a/b/c': not a label key",
        "llmchaos k8s check: 5 objects, 4 refused (Kubernetes 1.30, 7 kinds from CRDs)",
    ]
    assert r.stderr == ""


def test_a_kind_with_no_schema_is_refused_as_unknown(capsys, tmp_path):
    locust = {"apiVersion": "locust.io/v1", "kind": "LocustTest", "metadata": {"name": "t"}}
    foo = {"apiVersion": "v1", "kind": "Foo", "metadata": {"name": "f"}}
    r = check(capsys, dump(tmp_path / "x.yaml", locust, foo))
    assert r.returncode == 1
    assert r.stdout.splitlines()[:2] == [
        f"{tmp_path}/x.yaml:1: LocustTest/t: no CRD given for locust.io/v1 LocustTest (--crds)",
        f"{tmp_path}/x.yaml:6: Foo/f: Kubernetes 1.30 has no v1 Foo",
    ]


def test_a_kubectl_list_of_crds_is_read_and_the_release_is_chosen(capsys, tmp_path):
    items = [
        yaml.safe_load((crd_dir() / f"chaos-mesh.org_{k}.yaml").read_text()) for k in ("networkchaos", "workflows")
    ]
    crds = dump(tmp_path / "crds.yaml", {"apiVersion": "v1", "kind": "List", "items": items})
    network = yaml.safe_load_all((GOLDEN / "drill-jitter.yaml").read_text())
    r = check(capsys, dump(tmp_path / "o.yaml", *network), "--crds", crds, "--kubernetes", "v1.37")
    assert r.returncode == 0, r.stdout
    assert r.stdout.endswith("0 refused (Kubernetes 1.37, 2 kinds from CRDs)\n")


@pytest.mark.parametrize(
    ("files", "crds", "more", "error"),
    [
        (["key: [1"], [], [], ":1: invalid YAML: expected ',' or ']'"),
        (["- a\n- b\n"], [], [], ":1: a document must be an object"),
        (["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "[1"], [], [], "f1.yaml:1: invalid YAML"),
        ([], ["apiVersion: v1\nkind: ConfigMap\n"], [], "c0.yaml:1: kind: not a apiextensions.k8s.io/v1"),
        ([], ["apiVersion: v1\nkind: List\n"], [], "c0.yaml:1: items: a List must have its items"),
        ([], [], ["--kubernetes", "1.99"], "--kubernetes: '1.99': a release from 1.25 to 1.37, as 1.30"),
        ([], [], ["--kubernetes", "latest"], "--kubernetes: 'latest': a release from"),
    ],
)
def test_what_cannot_be_checked_is_one_line_and_exit_2(capsys, tmp_path, files, crds, more, error):
    paths = []
    for i, text in enumerate(files or ["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"]):
        (tmp_path / f"f{i}.yaml").write_text(text)
        paths.append(str(tmp_path / f"f{i}.yaml"))
    for i, text in enumerate(crds):
        (tmp_path / f"c{i}.yaml").write_text(text)
        more = [*more, "--crds", str(tmp_path / f"c{i}.yaml")]
    r = check(capsys, *paths, *more)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert error in r.stderr, r.stderr
