import subprocess
import sys

import pytest

from faults import schedule
from faults.injectors import KINDS
from llmchaos.errors import UsageError
from tests.procs import ROOT

GOOD = """seed: 7
faults:
  - name: drop
    kind: sse
    target: {proxy: "127.0.0.1:9100"}
    at: 2s
    duration: 1s
    every: 5s
    params: {drop_ratio: 0.15}
  - name: slow-gpu
    kind: gpu_clock
    target: {sim: "http://127.0.0.1:8000"}
    at: 500ms
    duration: 3s
    params: {graphics_mhz: 660}
"""


def load(tmp_path, text: str) -> schedule.Schedule:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return schedule.load(str(p), KINDS)


def test_windows_repeat_and_sort(tmp_path):
    s = load(tmp_path, GOOD)
    assert s.seed == 7
    windows = s.windows(horizon=13)
    assert [(w.name, w.start, w.end) for w in windows] == [
        ("slow-gpu", 0.5, 3.5), ("drop", 2.0, 3.0), ("drop", 7.0, 8.0), ("drop", 12.0, 13.0)]


BAD = [
    (GOOD.replace("kind: sse", "kind: plague"), ":4: faults[0].kind: unknown kind 'plague'"),
    (GOOD.replace("at: 500ms", "at: 1500ms").replace("kind: gpu_clock", "kind: sse").replace(
        '{sim: "http://127.0.0.1:8000"}', '{proxy: "127.0.0.1:9100"}').replace("{graphics_mhz: 660}", "{}"),
     ":3: faults[0]: overlaps 'slow-gpu'"),
    (GOOD.replace("duration: 3s", "duration: -3s"), ":14: faults[1].duration: bad duration '-3s'"),
    (GOOD.replace('    target: {proxy: "127.0.0.1:9100"}\n', ""), ":3: faults[0].target: missing"),
    (GOOD.replace("    every: 5s\n", "    every: 5s\n    colour: red\n"), ":9: faults[0].colour: unknown field"),
    (GOOD.replace("at: 2s", "at: 2 fortnights"), ":6: faults[0].at: bad duration"),
    (GOOD.replace("{drop_ratio: 0.15}", "{drop_ratio: 3}"), ":9: faults[0].params.drop_ratio: drop_ratio must"),
    (GOOD.replace("{graphics_mhz: 660}", "{graphics_mhz: fast}"), ":15: faults[1].params.graphics_mhz: must"),
    (GOOD.replace("every: 5s", "every: 500ms"), ":8: faults[0].every: must be at least the duration"),
    (GOOD.replace("name: slow-gpu", "name: drop"), ":10: faults[1].name: duplicate name 'drop'"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_bad_schedules_name_file_line_and_field(tmp_path, text, message):
    with pytest.raises(UsageError) as e:
        load(tmp_path, text)
    assert str(e.value).startswith(str(tmp_path / "s.yaml") + message.split(" ")[0]), str(e.value)
    assert message.split(": ", 1)[1] in str(e.value)


def test_cli_rejects_a_bad_schedule_with_exit_2_and_touches_nothing(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(BAD[0][0])
    journal = tmp_path / "journal.json"
    r = subprocess.run([sys.executable, "-m", "llmchaos.cli", "faults", "run", str(p), "--journal", str(journal)],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "faults[0].kind" in r.stderr
    assert not journal.exists()


def test_dry_run_prints_the_plan(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(GOOD)
    r = subprocess.run([sys.executable, "-m", "llmchaos.cli", "faults", "run", str(p), "--dry-run", "--duration",
                        "10"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("seed 7; 3 windows") and "slow-gpu" in lines[1] and "drop" in lines[2]


@pytest.mark.parametrize("params, message", [
    ({"delay": "100ms", "jitter": "30ms", "loss": "0.5%"}, None),
    ({"jitter": "30ms"}, "params.jitter: needs a delay"),
    ({"loss": "150%"}, "params.loss: a percentage, at most 100"),
    ({"delay": "fast"}, "params.delay: expected a number in ms"),
    ({"delay": "10ms", "rate": "fast"}, "params.rate: expected e.g. 8mbit"),
    ({"delay": "10ms", "limit": 5}, "params.limit: unknown field"),
])
def test_netem_params(params, message):
    from faults.injectors.base import FieldError
    from faults.injectors.netem import Netem

    if message is None:
        assert Netem.options(params) == {"delay": 100_000, "jitter": 30_000, "loss": 0.5}
        return
    with pytest.raises(FieldError) as e:
        Netem.options(params)
    assert f"{e.value.field}: {e.value}".startswith(message)


DOCKER = """faults:
  - name: freeze
    kind: docker
    target: {container: backend}
    at: 1s
    duration: 2s
    params: {action: pause}
"""


@pytest.mark.parametrize("text, message", [
    (DOCKER.replace("{action: pause}", "{action: explode}"), ":7: faults[0].params.action: expected one of pause"),
    (DOCKER.replace("{action: pause}", "{action: disconnect}"), ":7: faults[0].params.network: missing"),
    (DOCKER.replace("{action: pause}", "{action: kill, signal: SIGNOPE}"), ":7: faults[0].params.signal: unknown"),
    (DOCKER.replace("{action: pause}", "{action: cpu, cpus: 0}"), ":7: faults[0].params.cpus: must be positive"),
    (DOCKER.replace("{action: pause}", "{action: pause, cpus: 1}"), ":7: faults[0].params.cpus: unknown field"),
    (DOCKER.replace("{action: pause}", "{action: stop, timeout: soon}"), ":7: faults[0].params.timeout: expected"),
    (DOCKER.replace("{container: backend}", "{container: backend, label: a=b}"), ":4: faults[0].target: give"),
    (DOCKER.replace("{container: backend}", "{name: backend}"), ":4: faults[0].target.name: unknown field"),
])
def test_bad_docker_faults(tmp_path, text, message):
    test_bad_schedules_name_file_line_and_field(tmp_path, text, message)


def test_docker_faults_accept_each_action(tmp_path):
    for params in ("{action: pause}", "{action: kill, signal: TERM}", "{action: stop, timeout: 5s}",
                   "{action: restart}", "{action: cpu, cpus: 0.5}", "{action: disconnect, network: backend-net}"):
        assert load(tmp_path, DOCKER.replace("{action: pause}", params)).faults[0].params["action"]


def test_allowlist():
    from faults.allow import Allowlist

    default = Allowlist()
    assert default.interface(None, "eth0", {"eth0"}) == \
        "eth0 (host) carries the host's default route; refused without --allow-host-network"
    assert Allowlist(host_network=True).interface(None, "eth0", {"eth0"}) is None
    assert default.interface("lt-client", "eth0", set()) is None  # a namespace has no host default route
    assert Allowlist(netns=frozenset({"lt"})).interface("other", "veth0", set()) == \
        "network namespace 'other' is not in the allowlist (--allow-netns)"
    assert Allowlist(interfaces=frozenset({"veth0"})).interface(None, "veth1", set()) == \
        "interface 'veth1' is not in the allowlist (--allow-interface)"
    assert Allowlist(gpus=frozenset({1})).gpu(0) == "GPU 0 is not in the allowlist (--allow-gpu)"
    assert default.gpu(3) is None
    assert default.container("db", {"llmchaos.allow": "true"}) is None
    assert default.container("db", {"llmchaos.allow": "false"}) == \
        "container db has no allowed label (llmchaos.allow=true; --allow-label)"
    assert Allowlist(container_labels=frozenset({"tier"})).container("db", {"tier": "x"}) is None
