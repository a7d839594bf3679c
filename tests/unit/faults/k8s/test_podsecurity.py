"""Pod Security: the evaluator held to Kubernetes' own cases (k8s.io/pod-security-admission's
test/testdata at v1.30, made as its fixture generators make them: each a change to a base pod that
meets `restricted`, which must then pass or fail at the level named), and every pod we render held
to the level its namespace enforces: `restricted` but for the GPU Job, privileged in a namespace of
its own labelled so; `k8s check` refuses a pod its namespace's level forbids."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from faults import schedule
from faults.injectors import KINDS
from faults.k8s import podsecurity
from faults.k8s.load import Load
from faults.k8s.load import render as render_load
from faults.k8s.workflow import render
from tests.inprocess import llmchaos
from tests.procs import ROOT
from tests.unit.faults.k8s.schemas import crd_dir
from tests.unit.faults.k8s.test_render import CLUSTER, example_schedules

RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
PAUSE = "registry.k8s.io/pause"
BASE = {
    "containers": [{"name": "container1", "image": PAUSE, "securityContext": dict(RESTRICTED)}],
    "initContainers": [{"name": "initcontainer1", "image": PAUSE, "securityContext": dict(RESTRICTED)}],
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
}
Change = Callable[[dict], None]


def pod(change: Change | None = None) -> dict:
    out = copy.deepcopy(BASE)
    if change is not None:
        change(out)
    return out


def _all(p: dict) -> list[dict]:
    return p["containers"] + p["initContainers"]


def each(key: str, value: object) -> Change:
    """Set securityContext[key] in every container."""

    def change(p: dict) -> None:
        for c in _all(p):
            c["securityContext"][key] = copy.deepcopy(value)

    return change


def first(key: str, value: object, of: str = "containers") -> Change:
    """Set securityContext[key] in the first of `of`."""
    return lambda p: p[of][0]["securityContext"].__setitem__(key, value)


def at_pod(key: str, value: object) -> Change:
    return lambda p: p["securityContext"].__setitem__(key, value)


def spec(**fields: object) -> Change:
    return lambda p: p.update(copy.deepcopy(fields))


def volume(**body: object) -> Change:
    return spec(volumes=[{"name": "v", **body}])


def both(*changes: Change) -> Change:
    def change(p: dict) -> None:
        for c in changes:
            c(p)

    return change


def bare_windows(p: dict) -> None:
    """The Windows base: no container securityContext, no seccomp (Linux's checks do not apply)."""
    p["os"] = {"name": "windows"}
    for c in _all(p):
        del c["securityContext"]
    del p["securityContext"]["seccompProfile"]


LOCAL, BIND = {"type": "Localhost", "localhostProfile": "x"}, "NET_BIND_SERVICE"
CASES = [  # (the case's name in Kubernetes' testdata, the change, the most restrictive level it meets)
    ("base", None, "restricted"),
    ("hostnamespaces0", spec(hostIPC=True), "privileged"),
    ("hostnamespaces1", spec(hostNetwork=True), "privileged"),
    ("hostnamespaces2", spec(hostPID=True), "privileged"),
    ("privileged0", each("privileged", True), "privileged"),
    ("privileged pass0", each("privileged", False), "restricted"),
    ("capabilities_baseline0", each("capabilities", {"drop": ["ALL"], "add": ["NET_RAW"]}), "privileged"),
    ("capabilities_baseline pass0", each("capabilities", {"drop": ["ALL"], "add": ["CHOWN"]}), "baseline"),
    ("capabilities_restricted0", each("capabilities", {}), "baseline"),
    ("capabilities_restricted pass0", each("capabilities", {"drop": ["ALL"], "add": [BIND]}), "restricted"),
    ("hostpathvolumes0", volume(hostPath={"path": "/a"}), "privileged"),
    ("hostports0", lambda p: p["containers"][0].update(ports=[{"containerPort": 1, "hostPort": 1}]), "privileged"),
    ("hostports pass0", lambda p: p["containers"][0].update(ports=[{"containerPort": 1}]), "restricted"),
    ("apparmorprofile0", None, "privileged"),  # by annotation, below
    ("seccompprofile_baseline0", at_pod("seccompProfile", {"type": "Unconfined"}), "privileged"),
    ("seccompprofile_restricted0", at_pod("seccompProfile", None), "baseline"),
    ("seccompprofile pass", both(at_pod("seccompProfile", None), each("seccompProfile", LOCAL)), "restricted"),
    ("selinuxoptions0", at_pod("seLinuxOptions", {"type": "somevalue"}), "privileged"),
    ("selinuxoptions3", at_pod("seLinuxOptions", {"user": "somevalue"}), "privileged"),
    ("selinuxoptions pass1", at_pod("seLinuxOptions", {"type": "container_init_t", "level": "s0:c1"}), "restricted"),
    ("procmount0", each("procMount", "Unmasked"), "privileged"),
    ("sysctls0", at_pod("sysctls", [{"name": "othersysctl", "value": "other"}]), "privileged"),
    ("sysctls pass0", at_pod("sysctls", [{"name": "net.ipv4.ping_group_range", "value": "0 0"}]), "restricted"),
    ("windowshostprocess0", both(spec(hostNetwork=True), each("windowsOptions", {"hostProcess": True})), "privileged"),
    ("restrictedvolumes0", volume(gcePersistentDisk={"pdName": "t"}), "baseline"),
    ("restrictedvolumes pass", volume(persistentVolumeClaim={"claimName": "c"}), "restricted"),
    ("allowprivilegeescalation0", each("allowPrivilegeEscalation", None), "baseline"),
    ("allowprivilegeescalation1", each("allowPrivilegeEscalation", True), "baseline"),
    ("runasnonroot0", at_pod("runAsNonRoot", None), "baseline"),
    ("runasnonroot2", first("runAsNonRoot", False), "baseline"),
    ("runasnonroot pass1", both(at_pod("runAsNonRoot", None), each("runAsNonRoot", True)), "restricted"),
    ("runasuser0", at_pod("runAsUser", 0), "baseline"),
    ("runasuser1", first("runAsUser", 0, of="initContainers"), "baseline"),
    ("runasuser pass", at_pod("runAsUser", 1000), "restricted"),
    ("base_windows", bare_windows, "restricted"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "change", "meets"), CASES, ids=[c[0] for c in CASES])
def test_kubernetes_own_pod_security_cases(name, change, meets):
    notes = {f"{podsecurity.APPARMOR}container1": "unconfined"} if name.startswith("apparmor") else {}
    assert podsecurity.level(pod(change), notes) == meets
    higher = podsecurity.LEVELS[podsecurity.LEVELS.index(meets) + 1 :]
    assert all(podsecurity.violations(pod(change), lv, notes) for lv in higher)


def test_a_violation_is_worded_as_the_admission_words_it():  # its containers in its order: init ones first
    found = podsecurity.violations(pod(each("allowPrivilegeEscalation", True)), "restricted")
    assert found == [
        "allowPrivilegeEscalation != false "
        '(containers "initcontainer1", "container1" must set securityContext.allowPrivilegeEscalation=false)'
    ]
    assert podsecurity.violations(pod(lambda p: p.update(hostPID=True)), "baseline") == [
        "host namespaces (hostPID=true)"
    ]


def every_rendered_object() -> list[dict]:
    objects = []
    for name in example_schedules():
        path = str(Path(ROOT) / name)
        plan = schedule.load(path, KINDS)
        objects += render(plan, path, CLUSTER, 600 if any(f.every for f in plan.faults) else plan.end()).objects()
    for operator in (False, True):
        for workflow in ("", "drill"):
            load = Load(host="http://llm:8000", namespace="staging", workflow=workflow, operator=operator)
            objects += render_load(load)
    return objects


def test_every_pod_we_render_meets_restricted_but_the_gpu_job_in_its_own_privileged_namespace():
    objects = every_rendered_object()
    levels = {}
    for o in objects:
        for where, spec, notes in podsecurity.pod_specs(o):
            levels[(o["kind"], o["metadata"]["name"], where)] = podsecurity.level(spec, notes)
    gpu_jobs = {k for k in levels if k[0] == "Job" and k[1].startswith("example-slow-gpu")}
    assert gpu_jobs
    assert {levels[k] for k in gpu_jobs} == {"privileged"}
    others = {k: v for k, v in levels.items() if k not in gpu_jobs}
    assert {k[0] for k in others} >= {"Deployment", "Workflow"}  # the proxy, the Task steps, Locust
    assert set(others.values()) == {"restricted"}, others
    (ns,) = [o for o in objects if o["kind"] == "Namespace"]
    assert ns["metadata"]["labels"][podsecurity.LABEL] == "privileged"
    for o in objects:
        for _, spec, _ in podsecurity.pod_specs(o):
            for c in spec["containers"]:
                assert "cpu" in c["resources"]["requests"], (o["kind"], c["name"])
                assert "memory" in c["resources"]["limits"], (o["kind"], c["name"])
            if o["kind"] == "Deployment" and not spec.get("serviceAccountName"):
                assert spec["automountServiceAccountToken"] is False, o["metadata"]["name"]  # reads no API


def test_check_holds_pods_to_their_namespaces_level(tmp_path, capsys):
    objects = [o for o in every_rendered_object() if o["kind"] != "LocustTest"]  # no operator CRD given
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(objects))
    crds = str(crd_dir())
    r = llmchaos(capsys, "k8s", "check", str(tmp_path / "all.yaml"), "--crds", crds, "--pod-security", "restricted")
    assert r.returncode == 0, r.stdout  # the GPU Job's namespace says privileged; every other pod meets restricted
    leaky = copy.deepcopy(next(o for o in objects if o["kind"] == "Deployment"))
    leaky["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    (tmp_path / "leaky.yaml").write_text(yaml.safe_dump(leaky))
    r = llmchaos(capsys, "k8s", "check", str(tmp_path / "leaky.yaml"), "--pod-security", "restricted")
    name = leaky["metadata"]["name"]
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == (
        f"{tmp_path / 'leaky.yaml'}:1: Deployment/{name}: spec.template.spec: "
        f'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
        f'(container "{leaky["spec"]["template"]["spec"]["containers"][0]["name"]}" must set '
        "securityContext.allowPrivilegeEscalation=false)"
    )
    assert llmchaos(capsys, "k8s", "check", str(tmp_path / "leaky.yaml")).returncode == 0  # no level: not held
