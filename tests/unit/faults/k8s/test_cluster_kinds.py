"""`llmchaos k8s render` of the cluster's kinds: a replica's kill or restart is a PodChaos pod-kill on
its pod of --replica-selector (its StatefulSet pod index), a KV link's partition, loss or delay a
NetworkChaos from --prefill-selector's pods to --decode-selector's, each an object the API server and
Chaos Mesh's webhooks take; what a cluster cannot express (pause, holding, router) is one line, exit 2."""

from __future__ import annotations

import pytest
import yaml

from faults.k8s.replica import POD_INDEX
from tests.inprocess import llmchaos
from tests.unit.faults.k8s.schemas import errors

SIM = '"http://h:1"'
LINE = "  - {name: %s, kind: %s, target: {sim: %s%s}, at: %s, duration: %s, params: {%s}}\n"
SCHEDULE = "seed: 7\nfaults:\n" + "".join(
    LINE % (name, kind, SIM, target, at, length, params)
    for name, kind, target, at, length, params in [
        ("kill-one", "replica", ", replica: 1", "10s", "30s", "action: kill"),
        ("bounce", "replica", ", replica: 0", "60s", "5s", "action: restart"),
        ("cut", "kv_link", "", "0s", "20s", "action: partition"),
        ("lossy", "kv_link", "", "30s", "20s", "action: loss, loss: 20%"),
        ("slow", "kv_link", "", "60s", "20s", "action: delay, delay: 1.5s"),
    ]
)
SELECTORS = [
    "--replica-selector",
    "app=engine",
    "--prefill-selector",
    "role=prefill",
    "--decode-selector",
    "role=decode",
]


def render(capsys, tmp_path, text: str, *args: str):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return llmchaos(capsys, "k8s", "render", str(path), "--namespace", "staging", *args)


def test_replica_and_kv_link_windows_render_to_pod_and_network_chaos_an_api_server_takes(capsys, tmp_path):
    r = render(capsys, tmp_path, SCHEDULE, *SELECTORS)
    assert r.returncode == 0, r.stderr
    objects = list(yaml.safe_load_all(r.stdout))
    assert [o["kind"] for o in objects] == ["Workflow"]
    assert [e for o in objects for e in errors(o)] == []  # the CRDs' schemas and the webhooks' rules
    steps = {t["name"]: t for t in objects[0]["spec"]["templates"]}
    staging = {"namespaces": ["staging"]}
    kill = {"templateType": "PodChaos", "name": "kill-one", "deadline": "30s"}
    assert steps["kill-one"] == kill | {
        "podChaos": {
            "action": "pod-kill",
            "mode": "one",
            "selector": staging | {"labelSelectors": {"app": "engine", POD_INDEX: "1"}},
            "gracePeriod": 0,
        }
    }
    assert steps["bounce"]["podChaos"]["selector"]["labelSelectors"] == {"app": "engine", POD_INDEX: "0"}
    assert steps["bounce"]["podChaos"]["action"] == "pod-kill"
    link = {
        "mode": "all",
        "selector": staging | {"labelSelectors": {"role": "prefill"}},
        "direction": "to",
        "target": {"mode": "all", "selector": staging | {"labelSelectors": {"role": "decode"}}},
    }
    assert steps["cut"] == {
        "name": "cut",
        "templateType": "NetworkChaos",
        "deadline": "20s",
        "networkChaos": {"action": "partition", **link},
    }
    assert steps["lossy"]["networkChaos"] == {"action": "loss", **link, "loss": {"loss": "20"}}
    assert steps["slow"]["networkChaos"] == {"action": "delay", **link, "delay": {"latency": "1500ms"}}
    assert steps["slow-wait"] == {"name": "slow-wait", "templateType": "Suspend", "deadline": "60s"}


def test_a_duration_inside_a_workflows_chaos_is_what_the_webhook_refuses(capsys, tmp_path):
    r = render(capsys, tmp_path, SCHEDULE, *SELECTORS)
    workflow = next(yaml.safe_load_all(r.stdout))
    for template in workflow["spec"]["templates"]:
        if "networkChaos" in template:
            template["networkChaos"]["duration"] = "20s"
    refused = [e.split(": ", 2)[2] for e in errors(workflow)]
    detail = "should not define duration in chaos when using Workflow, use Template#Deadline instead."
    assert refused == [f"Invalid value: 20s: {detail}"] * 3


ONE = "seed: 7\nfaults:\n  - {name: w, kind: %s, target: %s, at: 0s, duration: 10s, params: %s}\n"
REFUSED = [
    (ONE % ("replica", f"{{sim: {SIM}, replica: 0}}", "{action: pause}"), SELECTORS, "faults[0].params.action"),
    (ONE % ("replica", f"{{sim: {SIM}, replica: 0}}", "{action: pause}"), SELECTORS, "params {loss: 100%}"),
    (ONE % ("replica", f'{{sim: {SIM}, holding: "a prompt"}}', "{action: kill}"), SELECTORS, "target.holding"),
    (ONE % ("router", f"{{sim: {SIM}, replica: 0}}", "{}"), SELECTORS, ":3: faults[0].kind: w: router: no Chaos"),
    (ONE % ("replica", f"{{sim: {SIM}, replica: 0}}", "{action: kill}"), [], "give --replica-selector"),
    (ONE % ("kv_link", f"{{sim: {SIM}}}", "{action: partition}"), [], "give --prefill-selector"),
    (
        ONE % ("kv_link", f"{{sim: {SIM}}}", "{action: partition}"),
        ["--prefill-selector", "role=prefill"],
        "give --decode-selector",
    ),
    (ONE % ("kv_link", f"{{sim: {SIM}}}", "{action: partition}"), ["--decode-selector", "role"], "--decode-selector"),
]


@pytest.mark.parametrize(("text", "args", "named"), REFUSED)
def test_what_a_cluster_cannot_express_is_one_line_naming_it(capsys, tmp_path, text, args, named):
    r = render(capsys, tmp_path, text, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert named in r.stderr
    assert r.stdout == ""
