"""`llmchaos k8s render`: every example schedule in the repository renders to objects an API server
would take (the CRDs' and Kubernetes' schemas), a broken object is caught by the same check, the
seeds' three drills render to their golden files (shown in docs/kubernetes.md), and a window a cluster
cannot express is one line and exit 2."""

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from faults import schedule
from faults.injectors import KINDS
from faults.k8s import admission, names, network, pods
from faults.k8s.cluster import Cluster, Step
from faults.k8s.workflow import WINDOWS, render
from faults.schedule import Window
from tests.inprocess import llmchaos
from tests.procs import ROOT
from tests.unit.faults.k8s.schemas import errors

GOLDEN = Path(__file__).parent / "golden"
DRILLS = {
    "drill-jitter": ["--selector", "app=llm", "--run", "drill-jitter"],
    "drill-gpu-clock": ["--selector", "app=llm", "--run", "drill-gpu-clock"],
    "drill-sse-drop": ["--upstream", "http://llm:8000", "--run", "drill-sse-drop"],
}
CLUSTER = Cluster(
    run="example",
    namespace="staging",
    selector={"app": "llm"},
    replicas={"app": "engine"},  # an example's replica and kv_link windows
    prefill={"role": "prefill"},
    decode={"role": "decode"},
    upstream="http://llm:8000",
)


def k8s(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    return llmchaos(capsys, "k8s", *args)


def example_schedules() -> list[str]:
    """Every schedule the repository ships outside the tests (a YAML file with a list of faults)."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.yaml", "*.yml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    found = []
    for name in files:
        if name.startswith("tests/") or not (Path(ROOT) / name).is_file():
            continue
        doc = yaml.safe_load((Path(ROOT) / name).read_text(encoding="utf-8"))
        if isinstance(doc, dict) and isinstance(doc.get("faults"), list):
            found.append(name)
    return sorted(found)


def test_the_examples_include_the_drills():
    assert {f"compose/schedules/{d}.yaml" for d in DRILLS} <= set(example_schedules())


@pytest.mark.parametrize("name", example_schedules())
def test_every_example_schedule_renders_to_objects_an_api_server_takes(name):
    path = str(Path(ROOT) / name)
    plan = schedule.load(path, KINDS)
    rendered = render(plan, path, CLUSTER, 600 if any(f.every for f in plan.faults) else plan.end())
    objects = rendered.objects()
    assert [o["kind"] for o in rendered.run].count("Workflow") == 1
    assert [e for o in objects for e in errors(o)] == []
    for o in objects:  # the run's namespace, but for the GPU Jobs' own
        gpu_job = o["kind"] in ("Job", "ServiceAccount") and o["metadata"]["name"].startswith("example-")
        want = None if o["kind"] == "Namespace" else "llmchaos-gpu" if gpu_job else "staging"
        assert o["metadata"].get("namespace") == want, o["metadata"]
        assert o["metadata"]["labels"]["llmchaos.dev/run"] == "example"


@pytest.mark.parametrize("drill", sorted(DRILLS))
def test_the_drills_render_to_their_golden_files(drill, capsys):
    r = k8s(capsys, "render", f"compose/schedules/{drill}.yaml", *DRILLS[drill])
    assert r.returncode == 0, r.stderr
    golden = GOLDEN / f"{drill}.yaml"
    if os.environ.get("LLMCHAOS_UPDATE_GOLDEN"):
        golden.write_text(r.stdout, encoding="utf-8")
    assert r.stdout == golden.read_text(encoding="utf-8")
    assert [e for o in yaml.safe_load_all(r.stdout) for e in errors(o)] == []


@pytest.mark.parametrize("drill", sorted(DRILLS))
def test_the_readme_shows_each_drill_as_rendered(drill):
    readme = (Path(ROOT) / "docs" / "kubernetes.md").read_text(encoding="utf-8")
    command = f"llmchaos k8s render compose/schedules/{drill}.yaml {' '.join(DRILLS[drill])}"
    assert command in readme
    block = readme[readme.index(command) :].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert block == (GOLDEN / f"{drill}.yaml").read_text(encoding="utf-8")


def gpu_drill(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[list[dict], list[dict]]:
    """The GPU drill rendered with `args` to DIR: its setup and its run objects."""
    r = k8s(capsys, "render", "compose/schedules/drill-gpu-clock.yaml", "--namespace", "staging", "--run", "gpu",
            "--selector", "app=llm", *args, "--out", str(tmp_path / "o"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    setup = list(yaml.safe_load_all((tmp_path / "o" / "setup.yaml").read_text()))
    run = list(yaml.safe_load_all((tmp_path / "o" / "run.yaml").read_text()))
    assert [e for o in setup + run for e in errors(o)] == []
    return setup, run


def test_the_gpu_job_runs_beside_a_server_pod_in_a_privileged_namespace_of_its_own(tmp_path, capsys):
    setup, run = gpu_drill(tmp_path, capsys)
    assert [(o["kind"], o["metadata"].get("namespace")) for o in setup] == [
        ("Namespace", None),
        ("ServiceAccount", "llmchaos-gpu"),
        ("Role", "staging"),  # reads the Workflow and lists the server's pods where they are
        ("RoleBinding", "staging"),
    ]
    assert setup[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert setup[3]["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-gpu", "namespace": "llmchaos-gpu"}]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]} in setup[2]["rules"]
    assert [(o["kind"], o["metadata"]["namespace"]) for o in run] == [("Workflow", "staging"), ("Job", "llmchaos-gpu")]
    job = run[1]["spec"]
    pod = job["template"]["spec"]
    assert "nodeName" not in pod  # placed by the scheduler beside a server pod, wherever that moved
    (term,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {
        "labelSelector": {"matchLabels": {"app": "llm"}},
        "namespaces": ["staging"],
        "topologyKey": "kubernetes.io/hostname",
    }
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["hostPID"]
    assert "runtimeClassName" not in pod
    (container,) = pod["containers"]
    assert container["securityContext"] == {"privileged": True}
    assert "nvidia.com/gpu" not in str(container["resources"])  # the server holds the GPUs
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert (env["ACCESS"], env["DRIVER_ROOT"], env["HOST_ROOT"]) == ("driver-root", "auto", "/proc/1/root")
    assert (env["GPU_INDEX"], env["SELECTOR"], env["NAMESPACE"], env["WORKFLOW"]) == ("0", "app=llm", "staging", "gpu")
    assert container["terminationMessagePath"] == env["TERMINATION_LOG"] == "/dev/termination-log"
    assert job["activeDeadlineSeconds"] == 30 + 60 + 120
    assert job["ttlSecondsAfterFinished"] > 0  # gone after its record is read: the drill can run again
    assert run[0]["spec"]["templates"][-1] == {"name": "slow-gpu", "templateType": "Suspend", "deadline": "60s"}


def test_the_gpu_job_can_reach_the_driver_through_the_nvidia_runtime(tmp_path, capsys):
    _, run = gpu_drill(tmp_path, capsys, "--gpu-access", "runtime-class")
    pod = run[1]["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert (env["ACCESS"], env["NVIDIA_VISIBLE_DEVICES"], env["NVIDIA_DRIVER_CAPABILITIES"]) == (
        "runtime-class",
        "all",  # every GPU mounted, none requested: the server pod holds them
        "utility",  # nvidia-smi and NVML
    )
    assert "DRIVER_ROOT" not in env


def test_each_render_names_a_new_run_unless_told_its_name(capsys):
    def run_name(*args: str) -> str:
        r = k8s(capsys, "render", "compose/schedules/drill-jitter.yaml", "--selector", "app=llm", *args)
        assert r.returncode == 0, r.stderr
        return next(yaml.safe_load_all(r.stdout))["metadata"]["labels"]["llmchaos.dev/run"]

    assert run_name("--run", "nightly") == "nightly"
    first = run_name()
    assert first.startswith("drill-jitter-")
    assert names.fresh("drill-jitter", 1_800_000_000) == "drill-jitter-tro8w0"
    assert names.fresh("drill-jitter", 1_800_000_001) != names.fresh("drill-jitter", 1_800_000_000)


def test_an_sse_window_with_corrupt_ratio_renders_its_params_as_given(tmp_path):
    """Issue 32's fault (a 200 with garbage) goes to the proxy's step as given, checked like any other."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "seed: 7\nfaults:\n"
        '  - {name: garbage, kind: sse, target: {proxy: "127.0.0.1:9100"}, at: 30s, duration: 60s,\n'
        "     params: {corrupt_ratio: 0.25, drop_ratio: 0.1, seed: 3}}\n"
    )
    plan = schedule.load(str(path), KINDS)
    rendered = render(plan, str(path), CLUSTER, plan.end())
    objects = rendered.objects()
    assert [e for o in objects for e in errors(o)] == []
    assert [o["kind"] for o in rendered.setup] == ["ConfigMap", "Deployment", "Service", "NetworkPolicy"]
    for o in objects:
        assert o["metadata"]["namespace"] == "staging"
        assert o["metadata"]["labels"]["llmchaos.dev/run"] == "example"
    params = {"corrupt_ratio": 0.25, "drop_ratio": 0.1, "seed": 3}
    windows = json.loads(rendered.run[0]["metadata"]["annotations"][WINDOWS])
    assert windows["garbage"]["params"] == params
    one = tmp_path / "one.yaml"  # the file the step's `llmchaos faults run` reads, checked as it checks it
    one.write_text(rendered.setup[0]["data"]["garbage.yaml"])
    (spec,) = schedule.load(str(one), KINDS).faults
    assert (spec.kind, spec.params, spec.target) == ("sse", params, {"proxy": "example-proxy-9100:9199"})


@pytest.mark.parametrize(
    "mutate",
    [
        lambda o: o["spec"]["templates"][-1]["networkChaos"].update(action="jitter"),  # not an action
        lambda o: o["spec"]["templates"][-1]["networkChaos"]["delay"].update(latency="100 ms"),
        lambda o: o["spec"]["templates"][-1]["networkChaos"]["delay"].update(jiter="30ms"),  # a misspelt field
        lambda o: o["spec"]["templates"][-1]["networkChaos"].update(duration="60s"),  # the webhook's: deadline
        lambda o: o["spec"]["templates"][-1].update(templateType="PodChaos", podChaos={"action": "container-kill"}),
        lambda o: o["spec"].pop("entry"),
        lambda o: o["metadata"]["labels"].update({"llmchaos.dev/window": "Not a label!"}),
        lambda o: o["metadata"].update(name="Drill_Jitter"),
    ],
)
def test_a_broken_object_is_caught_by_the_same_check(mutate):
    workflow = next(yaml.safe_load_all((GOLDEN / "drill-jitter.yaml").read_text()))
    assert errors(workflow) == []
    broken = copy.deepcopy(workflow)
    mutate(broken)
    assert errors(broken) != []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda pod: pod.update(nodename="gpu-node-1"),  # Kubernetes' field is nodeName
        lambda pod: pod["containers"][0].update(securityContext={"privileged": "yes"}),
        lambda pod: pod.pop("containers"),
    ],
)
def test_a_broken_core_object_is_caught_too(mutate):
    job = list(yaml.safe_load_all((GOLDEN / "drill-gpu-clock.yaml").read_text()))[-1]
    assert job["kind"] == "Job"
    assert errors(job) == []
    mutate(job["spec"]["template"]["spec"])
    assert errors(job) != []


NETEM = "seed: 7\nfaults:\n  - {name: %s, kind: %s, target: %s, at: %s, duration: 60s, params: %s}\n"
BAD = [
    (
        NETEM % ("j", "netem", "{netns: lt-client, interface: veth-lt}", "30s", "{delay: 100ms}"),
        [],
        "faults[0].target.netns",
    ),
    (NETEM % ("j", "netem", "{interface: eth0}", "30s", "{delay: 100ms}"), [], "--selector"),
    (
        NETEM % ("j" * 41, "netem", "{interface: eth0}", "30s", "{delay: 100ms}"),
        ["--selector", "a=b"],
        "faults[0].name",
    ),
    (NETEM % ("Jitter", "netem", "{interface: eth0}", "30s", "{delay: 100ms}"), ["--selector", "a=b"], "DNS label"),
    (NETEM % ("j", "netem", "{interface: eth0}", "1.5s", "{delay: 100ms}"), ["--selector", "a=b"], "faults[0].at"),
    (NETEM % ("j", "netem", "{interface: eth0}", "0s", "{reorder: 5%}"), ["--selector", "a=b"], "params.reorder"),
    (
        NETEM % ("g", "gpu_clock", '{sim: "http://127.0.0.1:8000"}', "0s", "{graphics_mhz: 500}"),
        ["--selector", "a=b"],
        "target.sim",
    ),
    (NETEM % ("g", "gpu_clock", "{gpu: 0}", "0s", "{graphics_mhz: 500}"), [], "--selector"),
    (NETEM % ("s", "sse", '{proxy: "127.0.0.1:9100"}', "0s", "{drop_ratio: 0.1}"), [], "--upstream"),
    (
        NETEM % ("s", "sse", "{proxy: proxy}", "0s", "{drop_ratio: 0.1}"),
        ["--upstream", "http://m:8000"],
        "target.proxy",
    ),
    (NETEM % ("d", "docker", '{label: "a=b"}', "0s", "{action: cpu, cpus: 0.5}"), [], "params.action"),
    (NETEM % ("d", "docker", '{label: "a=b", host: "tcp://h:2375"}', "0s", "{action: pause}"), [], "target.host"),
    (NETEM % ("d", "docker", '{label: "not a label"}', "0s", "{action: kill}"), [], "target.label"),
    (NETEM % ("d", "docker", "{container: server}", "0s", "{action: kill}"), [], "--selector"),
    (NETEM % ("d", "docker", '{label: "a=b"}', "0s", "{action: pause}"), [], "pod-failure restarts the container"),
    (NETEM % ("d", "docker", '{label: "a=b"}', "0s", "{action: pause, cluster: freeze}"), [], "params.cluster"),
    (NETEM % ("d", "docker", '{label: "a=b"}', "0s", "{action: kill, signal: SIGTERM}"), [], "params.signal"),
    (
        NETEM % ("j", "netem", "{interface: eth0}", "0s", "{delay: 1ms}"),
        ["--selector", "a=b", "--run", "Bad_Run"],
        "--run",
    ),
    (
        NETEM % ("j", "netem", "{interface: eth0}", "0s", "{delay: 1ms}"),
        ["--selector", "a=b", "--run", "r" * 41],
        "--run",
    ),
    (NETEM % ("j", "netem", "{interface: eth0}", "0s", "{delay: 1ms}"), ["--selector", "app"], "--selector"),
    (  # the last value had silently won
        NETEM % ("j", "netem", "{interface: eth0}", "0s", "{delay: 1ms}"),
        ["--selector", "app=llm,app=x"],
        "--selector: app given twice",
    ),
    (
        NETEM % ("g", "gpu_clock", "{gpu: 0}", "0s", "{graphics_mhz: 500}"),
        ["--selector", "a=b", "--driver-root", "run/nvidia"],
        "--driver-root",
    ),
    (
        NETEM % ("g", "gpu_clock", "{gpu: 0}", "0s", "{graphics_mhz: 500}"),
        ["--selector", "a=b", "--gpu-namespace", "GPU"],
        "--gpu-namespace",
    ),
    (  # rendered as 660,660 under an annotation of 660.5
        NETEM % ("g", "gpu_clock", "{gpu: 0}", "0s", "{graphics_mhz: 660.5}"),
        ["--selector", "a=b"],
        "params.graphics_mhz: must be a whole number of MHz",
    ),
    (
        NETEM % ("g", "gpu_clock", "{gpu: 99999999999999999999}", "0s", "{graphics_mhz: 660}"),
        ["--selector", "a=b"],
        "target.gpu: must be a GPU index, 0 to 1023",
    ),
    (  # it had become the proxy's argument
        NETEM % ("s", "sse", '{proxy: "127.0.0.1:9100"}', "0s", "{drop_ratio: 0.1}"),
        ["--upstream", "http://m:8000/v1\n--evil"],
        "--upstream: a URL has no spaces or control characters",
    ),
    (
        NETEM % ("j", "netem", "{interface: eth0}", "0s", "{delay: 1ms}"),
        ["--selector", "a=b", "--namespace", "Prod"],
        "--namespace",
    ),
    (
        (NETEM % ("j", "netem", "{interface: eth0}", "0s", "{delay: 1ms}")).replace("60s,", "60s, every: 2m,"),
        ["--selector", "a=b"],
        "--duration",
    ),
    (
        (NETEM % ("j", "netem", "{interface: eth0}", "0s", "{delay: 1ms}")).replace("60s,", "60s, direction: ingress,"),
        ["--selector", "a=b"],
        "faults[0].direction",
    ),
    (
        (NETEM % ("j", "tbf", "{interface: eth0}", "0s", "{rate: 1mbit}")).replace("60s,", "60s, match: {dport: 80},"),
        ["--selector", "a=b"],
        "faults[0].match.dport",
    ),
    (
        NETEM % ("j", "netem", "{interface: eth0}", "0s", "{delay: 100ms, jitter: 30ms, distribution: normal}"),
        ["--selector", "a=b"],
        "faults[0].params.distribution",
    ),
]


@pytest.mark.parametrize(("text", "args", "named"), BAD)
def test_what_a_cluster_cannot_express_is_one_line_and_exit_2(tmp_path, text, args, named, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    r = k8s(capsys, "render", str(path), *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr
    assert named in r.stderr
    assert r.stdout == ""


def test_repeats_whose_steps_would_share_a_name_are_refused(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        "faults:\n"
        "  - {name: a, kind: netem, target: {interface: eth0}, at: 0s, duration: 10s, every: 60s,\n"
        "     params: {delay: 1ms}}\n"
        "  - {name: a-1, kind: tbf, target: {interface: eth0}, at: 0s, duration: 10s, params: {rate: 1mbit}}\n"
    )
    r = k8s(capsys, "render", str(path), "--selector", "a=b", "--duration", "120")
    assert r.returncode == 2
    assert "another window's" in r.stderr


def _piece(kind: str, target: dict, params: dict, module=network) -> dict:
    return module.piece(Step(Window("w", kind, target, params, 10.0, 70.0), "w"), CLUSTER).template


def test_netem_params_become_one_action_or_netem():
    assert _piece("netem", {"interface": "eth0"}, {"loss": "0.5%"})["networkChaos"]["loss"] == {"loss": "0.5"}
    assert _piece("netem", {"interface": "eth0"}, {"loss": 1})["networkChaos"]["action"] == "loss"
    both = _piece("netem", {"interface": "eth0"}, {"delay": 0.25, "correlation": 25, "jitter": 1, "duplicate": 2})
    chaos = both["networkChaos"]
    assert chaos["action"] == "netem"
    assert chaos["delay"] == {"latency": "250us", "jitter": "1ms", "correlation": "25"}
    assert chaos["duplicate"] == {"duplicate": "2"}
    reorder = _piece("netem", {"interface": "eth0"}, {"delay": "10ms", "reorder": "5%"})["networkChaos"]["delay"]
    assert reorder["reorder"] == {"reorder": "5", "gap": 1}  # gap 1, as tc and pyroute2 apply it


def test_a_window_aimed_at_peers_shapes_what_the_pods_send_them():
    """`egress` (the default) is NetworkChaos's `to`; `match.dst` names the peers (externalTargets);
    netem's correlations go with their own action; a uniform distribution is Chaos Mesh's own."""
    params = {"delay": "100ms", "jitter": "30ms", "distribution": "uniform", "loss": "1%", "loss_correlation": "25%"}
    aimed = {**params, "direction": "egress", "match": {"dst": ["10.0.0.0/24", "10.1.0.7"]}}
    chaos = _piece("netem", {"interface": "eth0"}, aimed)["networkChaos"]
    assert (chaos["direction"], chaos["externalTargets"]) == ("to", ["10.0.0.0/24", "10.1.0.7"])
    assert chaos["loss"] == {"loss": "1", "correlation": "25"}
    assert chaos["delay"] == {"latency": "100ms", "jitter": "30ms"}
    plain = _piece("tbf", {"interface": "eth0"}, {"rate": "8mbit", "match": {"dst": "10.0.0.9"}})["networkChaos"]
    assert (plain["direction"], plain["externalTargets"]) == ("to", ["10.0.0.9"])
    assert "externalTargets" not in _piece("tbf", {"interface": "eth0"}, {"rate": "8mbit"})["networkChaos"]


def test_tbf_becomes_bandwidth_with_the_queue_tc_makes_of_its_latency():
    chaos = _piece("tbf", {"interface": "eth0"}, {"rate": "8mbit"})["networkChaos"]
    assert chaos["action"] == "bandwidth"
    assert chaos["bandwidth"] == {"rate": "8mbit", "limit": 1_000_000 * 50 // 1000 + 32768, "buffer": 32768}
    # Chaos Mesh's webhook reads an unsigned integer before the unit: 1.5mbit is refused, 1500kbit taken
    decimal = _piece("tbf", {"interface": "eth0"}, {"rate": "1.5mbit"})["networkChaos"]["bandwidth"]
    assert decimal["rate"] == "1500kbit"
    assert decimal["limit"] == 1_500_000 // 8 * 50 // 1000 + 32768  # the same rate
    netem_rate = _piece("netem", {"interface": "eth0"}, {"rate": "2.25gbit"})["networkChaos"]["rate"]
    assert netem_rate == {"rate": "2250mbit"}
    assert admission.errors({"apiVersion": admission.API, "kind": "NetworkChaos", "spec": {"bandwidth": decimal}}) == []


def test_docker_actions_become_pod_chaos():
    def chaos(target: dict, params: dict) -> dict:
        return _piece("docker", target, params, pods)["podChaos"]

    # a pause, asked for as a partition: every packet the pods send dropped for the window
    partition = _piece("docker", {"label": "app=llm"}, {"action": "pause", "cluster": "partition"}, pods)
    assert partition["templateType"] == "NetworkChaos"
    assert partition["networkChaos"] == {
        "action": "loss",
        "mode": "all",
        "selector": {"namespaces": ["staging"], "labelSelectors": {"app": "llm"}},
        "direction": "to",
        "loss": {"loss": "100"},
    }
    kill = chaos({"container": "server"}, {"action": "kill"})
    assert (kill["action"], kill["containerNames"], kill["selector"]["labelSelectors"]) == (
        "container-kill",
        ["server"],
        {"app": "llm"},
    )
    stop = chaos({"label": "llmchaos.allow"}, {"action": "stop", "timeout": "5s"})
    assert (stop["action"], stop["gracePeriod"]) == ("pod-kill", 5)
    assert stop["selector"]["expressionSelectors"] == [{"key": "llmchaos.allow", "operator": "Exists"}]
