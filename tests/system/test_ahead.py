"""tests/ahead.py, what make test runs each timing test in: the process and whatever it starts, in
any session (an autogroup of its own) and in a dockerd's containers, share a cpu cgroup of the
highest weight, and nothing of it is left afterwards."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.ahead import Ahead, cgroup, controller
from tests.system.dockerd import build_image, dockerd, sleeper


def cpu_cgroup(pid: int | str = "self") -> str:
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return next(line.split(":", 2)[2] for line in lines if "cpu" in line.split(":")[1].split(","))


def test_a_process_its_new_sessions_and_its_containers_run_ahead_then_nothing_is_left():
    ahead, before = Ahead(), cpu_cgroup()
    with ahead.running():
        assert ahead.path is not None
        mine = cpu_cgroup()
        assert cgroup() == mine == f"/{ahead.path.name}"
        found = controller()
        assert found is not None, "no cpu cgroup controller on this machine"
        _, weight, highest = found
        assert (ahead.path / weight).read_text().strip() == str(highest)
        child = subprocess.run(["cat", "/proc/self/cgroup"], start_new_session=True, capture_output=True, text=True)
        assert f"cpu:{mine}\n" in child.stdout.replace("cpu,cpuacct:", "cpu:")
        with dockerd() as client:
            build_image(client)
            box = sleeper(client, "llmc-ahead")
            assert cpu_cgroup(client.api.inspect_container(box.id)["State"]["Pid"]).startswith(f"{mine}/")
            box.remove(force=True)
    assert cpu_cgroup() == before
    assert cgroup() is None
    made = ahead.path.name
    ahead.remove()
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{made}"))
