"""`target: {host: NAME, ...}` in a schedule: the window runs on that fault host."""

import math

from tests.unit.faults.schedules import GOOD, assert_rejected, load

ON_HOST = GOOD.replace('target: {sim: "http://127.0.0.1:8000"}', 'target: {host: gpu-1, sim: "http://127.0.0.1:8000"}')


def test_a_host_in_the_target_names_the_fault_host_and_leaves_the_injector_its_own_target(tmp_path):
    s = load(tmp_path, ON_HOST)
    gpu = s.faults[1]
    assert (gpu.host, gpu.target) == ("gpu-1", {"sim": "http://127.0.0.1:8000"})
    assert gpu.target_key == '{"host": "gpu-1", "sim": "http://127.0.0.1:8000"}'
    assert s.faults[0].host is None
    assert s.faults[0].target_key == '{"proxy": "127.0.0.1:9100"}'
    assert s.hosts() == ["gpu-1"]
    assert [f.name for f in s.on(None).faults] == ["drop"]
    assert [f.name for f in s.on("gpu-1").faults] == ["slow-gpu"]
    assert [w.host for w in s.windows(4)] == ["gpu-1", None]


def test_the_same_target_on_two_hosts_does_not_overlap(tmp_path):
    two = ON_HOST + ON_HOST.split("faults:\n", 1)[1].split("  - name: slow-gpu\n", 1)[1].join(
        ["  - name: slow-gpu-2\n", ""]
    ).replace("host: gpu-1", "host: gpu-2")
    s = load(tmp_path, two)
    assert s.hosts() == ["gpu-1", "gpu-2"]
    assert_rejected(tmp_path, two.replace("host: gpu-2", "host: gpu-1"), ":16: faults[2]: overlaps 'slow-gpu'")


def test_a_bad_host_is_refused_naming_its_line(tmp_path):
    assert_rejected(tmp_path, ON_HOST.replace("host: gpu-1", 'host: "gpu 1"'), ":12: faults[1].target.host: must be")
    assert_rejected(tmp_path, ON_HOST.replace("host: gpu-1,", "host: 7,"), ":12: faults[1].target.host: must be")
    only = ON_HOST.replace('{host: gpu-1, sim: "http://127.0.0.1:8000"}', "{host: gpu-1}")
    assert_rejected(tmp_path, only, ":12: faults[1].target: names only a host")


def test_a_docker_daemon_url_in_host_stays_the_daemons(tmp_path):
    docker = (
        GOOD.replace(
            'target: {sim: "http://127.0.0.1:8000"}', 'target: {container: llm, host: "unix:///run/docker.sock"}'
        )
        .replace("kind: gpu_clock", "kind: docker")
        .replace("{graphics_mhz: 660}", "{action: pause}")
    )
    f = load(tmp_path, docker).faults[1]
    assert (f.host, f.target["host"]) == (None, "unix:///run/docker.sock")


def test_occurrence_and_next_edge(tmp_path):
    drop = load(tmp_path, GOOD).faults[0]  # at 2s, 1s long, every 5s
    assert drop.occurrence(2.5, 100) == (0, 2.0)
    assert drop.occurrence(3.0, 100) is None
    assert drop.occurrence(7.2, 100) == (1, 7.0)
    assert drop.occurrence(7.2, 7.0) is None  # its start is past the horizon
    assert [drop.next_edge(t, 100) for t in (0, 2.0, 2.5, 3.0, 6.9)] == [2.0, 3.0, 3.0, 7.0, 7.0]
    assert drop.next_edge(3.5, 7.0) == math.inf
    once = load(tmp_path, GOOD).faults[1]  # at 0.5s for 3s
    assert [once.next_edge(t, 100) for t in (0, 0.5, 3.5, 9)] == [0.5, 3.5, math.inf, math.inf]
