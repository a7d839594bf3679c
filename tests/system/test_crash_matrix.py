"""The crash matrix: `llmchaos faults run` SIGKILLed or SIGTERMed at each stage of a fault's life,
for each kind on a real target, then `llmchaos faults recover`: the target reads back exactly as it
was before the run, and recover says so truthfully (exit 0 only when everything was restored).

The runner is stopped at a precise stage by its test seam (LLMCHAOS_FAULTS_TEST_PAUSE, see
faults/runner.py): it SIGSTOPs itself there, and the test kills it, or SIGTERMs and continues it.
Targets: a tbf on a veth pair in namespaces this module creates, a CPU quota on a container in the
session's own dockerd, a fault on a real `llmchaos proxy` on loopback, and the reference server's
simulated GPU clock and its corrupt fault (through its admin API), each with some state of its own
before the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from faults.injectors.tbf import Tbf
from faults.runner import STAGES, TEST_PAUSE_ENV
from tests.integration.test_sse_proxy import FAULT, proxy
from tests.procs import ROOT, serve
from tests.system.dockerd import sleeper, sock
from tests.system.netns import veth_pair

TOKEN = "crash-matrix-token"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
CPU_QUOTA = 50_000  # the container's own quota before the run: half a CPU


@dataclass
class Target:
    """A fault on a real target, and how to read that target's state back."""

    kind: str
    target: str  # YAML flow mapping
    params: str
    state: Callable[[], object]

    def schedule(self, path: Path) -> Path:
        path.write_text(
            f"faults:\n  - {{name: crash-{self.kind}, kind: {self.kind}, target: {self.target}, at: 0s, "
            f"duration: 300ms, params: {self.params}}}\n"
        )
        return path


@pytest.fixture(scope="module")
def server_and_proxy() -> Iterator[tuple[str, str]]:
    with serve("--sim-time-scale", "0.1", "--admin-token", TOKEN) as server, proxy(server.url) as p:
        httpx.put(server.url + "/admin/device/clocks", json={"graphics_mhz": 1200}, headers=ADMIN).raise_for_status()
        yield server.url, p


@pytest.fixture(scope="module")
def tbf_target() -> Iterator[Target]:
    with veth_pair() as (_, b, _, _):
        tbf = Tbf({"netns": b, "interface": "veth0"})
        yield Target("tbf", f"{{netns: {b}, interface: veth0}}", "{rate: 8mbit}", tbf.read_back)


@pytest.fixture(scope="module")
def docker_target(daemon) -> Iterator[Target]:
    client, _ = daemon
    c = sleeper(client, "llmc-crash", cpu_period=100_000, cpu_quota=CPU_QUOTA)

    def state() -> object:
        c.reload()
        return c.status, c.attrs["HostConfig"]["CpuQuota"], c.attrs["HostConfig"]["CpuPeriod"]

    try:
        yield Target("docker", f'{{container: {c.name}, host: "{sock(client)}"}}', "{action: cpu, cpus: 0.1}", state)
    finally:
        c.remove(force=True)


@pytest.fixture
def target(request, server_and_proxy) -> Target:
    server, p = server_and_proxy
    if request.param == "sse":
        return Target(
            "sse",
            f'{{proxy: "{p.split("//")[1]}"}}',
            "{drop_ratio: 0.5}",
            lambda: httpx.get(p + FAULT).json()["active"],
        )
    if request.param == "gpu_clock":

        def clock() -> object:
            clocks = httpx.get(server + "/admin/device/clocks", headers=ADMIN).json()
            return clocks["locked"], clocks["graphics_mhz"]

        return Target("gpu_clock", f'{{sim: "{server}"}}', "{graphics_mhz: 660}", clock)
    if request.param == "corrupt":
        return Target(
            "corrupt",
            f'{{sim: "{server}"}}',
            "{}",
            lambda: httpx.get(server + "/admin/faults/corrupt", headers=ADMIN).json()["corrupt"],
        )
    return request.getfixturevalue(f"{request.param}_target")


def faults(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "faults", *args],
        cwd=ROOT,
        env={**os.environ, "LLMCHAOS_ADMIN_TOKEN": TOKEN, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_stopped(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until the runner has SIGSTOPped itself at its stage."""
    deadline = time.monotonic() + timeout
    while psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the runner never reached its stage"
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("target", ["tbf", "docker", "sse", "gpu_clock", "corrupt"], indirect=True)
def test_recover_restores_the_state_before_the_run(tmp_path, target, stage, sig):
    before = target.state()
    journal = tmp_path / "journal.json"
    run = faults("run", str(target.schedule(tmp_path / "s.yaml")), "--journal", str(journal), **{TEST_PAUSE_ENV: stage})
    try:
        wait_stopped(run)
        applied = target.state() != before
        assert applied == (stage == "in-apply"), (stage, before, target.state())  # the seam is where it says
        run.send_signal(sig)
        if sig == signal.SIGTERM:
            run.send_signal(signal.SIGCONT)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    if sig == signal.SIGTERM:
        assert run.returncode == 0, err  # stopped cleanly, everything reverted by the runner itself
    rec = faults("recover", "--journal", str(journal))
    out, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, out + err
    lines = out.strip().splitlines()
    if sig == signal.SIGTERM or stage == "before-journal":
        assert lines == ["nothing to recover"]
    else:
        assert [line.split(" on ")[0] for line in lines] == [f"reverted {target.kind} crash-{target.kind}"]
    assert target.state() == before
    assert not journal.exists() or json.loads(journal.read_text()) == []
