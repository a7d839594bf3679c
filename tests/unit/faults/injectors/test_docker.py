import pytest

from tests.unit.faults.schedules import assert_rejected, load

DOCKER = """faults:
  - name: freeze
    kind: docker
    target: {container: backend}
    at: 1s
    duration: 2s
    params: {action: pause}
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (DOCKER.replace("{action: pause}", "{action: explode}"), ":7: faults[0].params.action: expected one of pause"),
        (DOCKER.replace("{action: pause}", "{action: disconnect}"), ":7: faults[0].params.network: missing"),
        (DOCKER.replace("{action: pause}", "{action: kill, signal: SIGNOPE}"), ":7: faults[0].params.signal: unknown"),
        (DOCKER.replace("{action: pause}", "{action: cpu, cpus: 0}"), ":7: faults[0].params.cpus: must be positive"),
        (DOCKER.replace("{action: pause}", "{action: pause, cpus: 1}"), ":7: faults[0].params.cpus: unknown field"),
        (DOCKER.replace("{action: pause}", "{action: stop, timeout: soon}"), ":7: faults[0].params.timeout: expected"),
        (DOCKER.replace("{container: backend}", "{container: backend, label: a=b}"), ":4: faults[0].target: give"),
        (DOCKER.replace("{container: backend}", "{name: backend}"), ":4: faults[0].target.name: unknown field"),
    ],
)
def test_bad_docker_faults(tmp_path, text, message):
    assert_rejected(tmp_path, text, message)


def test_docker_faults_accept_each_action(tmp_path):
    for params in (
        "{action: pause}",
        "{action: kill, signal: TERM}",
        "{action: stop, timeout: 5s}",
        "{action: restart}",
        "{action: cpu, cpus: 0.5}",
        "{action: disconnect, network: backend-net}",
    ):
        assert load(tmp_path, DOCKER.replace("{action: pause}", params)).faults[0].params["action"]
