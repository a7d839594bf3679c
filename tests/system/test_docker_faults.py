"""The docker injector against a real dockerd this module starts: containers paused, CPU-throttled,
killed and disconnected on schedule, measured from outside, and always restored (SIGTERM, SIGKILL
then `llmchaos faults recover`). Each container counts its own progress into a file we watch."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from faults.injectors.docker import Docker
from tests.noise import WakeNoise
from tests.procs import ROOT, wait_for
from tests.system.dockerd import ALLOW, change_cost, sleeper, sock

TICKER = "while :; do n=0; while [ $n -lt 1000 ]; do n=$((n+1)); done; echo x >> /out/ticks; done"


def cpu_used(pid: int) -> Callable[[], float]:
    """The CPU seconds used so far by the cgroup process `pid` runs in (a container's: the kernel's
    own account, cgroup v1's cpuacct.usage or v2's cpu.stat)."""
    groups = {
        c: path.lstrip("/")
        for _, c, path in (x.split(":", 2) for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines())
    }
    v1 = next((path for c, path in groups.items() if "cpuacct" in c.split(",")), None)
    if v1 is not None:
        usage = Path("/sys/fs/cgroup/cpuacct", v1, "cpuacct.usage")
        return lambda: int(usage.read_text()) / 1e9
    stat = Path("/sys/fs/cgroup", groups[""], "cpu.stat")  # v2: its one hierarchy

    def v2() -> float:
        return int(dict(f.split() for f in stat.read_text().splitlines())["usage_usec"]) / 1e6

    return v2


class Ticks:
    """Samples a container's tick file and its cgroup's CPU seconds every 20 ms: how much work it did
    in any interval, and how much CPU it had. Each sample holds the times just before and after it
    was read, so a sampler woken late (a busy machine) never dates a reading before it was taken."""

    def __init__(self, path: Path, cpu: Callable[[], float]) -> None:
        self.path, self.cpu = path, cpu
        self.samples = [(time.time(), time.time(), 0, cpu())]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.02):
            before = time.time()
            size = self.path.stat().st_size // 2 if self.path.exists() else 0
            try:
                used = self.cpu()
            except OSError:  # a killed container's cgroup is gone until it starts again
                used = math.nan
            self.samples.append((before, time.time(), size, used))

    def _rate(self, a: float, b: float, field: int) -> float:
        inside = [s for s in self.samples if a <= s[0] and s[1] <= b]
        assert len(inside) >= 2, f"no two samples within [{a}, {b}]"
        first, last = inside[0], inside[-1]
        return (last[field] - first[field]) / (last[0] - first[1])

    def rate(self, a: float, b: float) -> float:
        """Ticks a second between the first and the last reading taken wholly within [a, b]."""
        return self._rate(a, b, 2)

    def cpus(self, a: float, b: float) -> float:
        """The CPUs the container used, on average, between the first and last reading within [a, b]."""
        return self._rate(a, b, 3)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


@pytest.fixture
def ticker(daemon, tmp_path) -> Iterator[tuple[docker.models.containers.Container, Ticks]]:
    client, image = daemon
    out = tmp_path / "out"
    out.mkdir()
    c = client.containers.run(
        image,
        ["sh", "-c", TICKER],
        detach=True,
        network_mode="none",
        labels=ALLOW,
        name=f"llmc-ticker-{uuid.uuid4().hex[:6]}",
        volumes={str(out): {"bind": "/out"}},
    )
    c.reload()
    ticks = Ticks(out / "ticks", cpu_used(c.attrs["State"]["Pid"]))
    try:
        yield c, ticks
    finally:
        ticks.close()
        c.remove(force=True)


def schedule(tmp_path: Path, url: str, container: str, *windows: str) -> str:
    path = tmp_path / "schedule.yaml"
    faults = "".join(
        f"""
  - name: {name}
    kind: docker
    target: {{container: {container}, host: "{url}"}}
    at: {at}
    duration: {length}
    params: {params}"""
        for name, at, length, params in (w.split("|") for w in windows)
    )
    path.write_text(f"seed: 1\nfaults:{faults}\n")
    return str(path)


def faults(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "faults", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def dockerd_events(client: docker.DockerClient, c, since: float, until: float) -> dict[str, list[float]]:
    """When dockerd did each thing to `c` between two unix times, in order, by action."""
    seen: dict[str, list[float]] = {}
    for e in client.events(since=since, until=until, decode=True, filters={"container": c.id}):
        seen.setdefault(e["Action"], []).append(e["timeNano"] / 1e9)
    return seen


def status(c) -> str:
    c.reload()
    return c.status


@pytest.mark.timing
def test_pause_throttle_and_kill_on_schedule_then_restored(daemon, ticker, tmp_path):
    client, _ = daemon
    c, ticks = ticker
    time.sleep(1.0)  # a baseline second
    journal, timeline = tmp_path / "journal.json", tmp_path / "timeline.json"
    path = schedule(
        tmp_path,
        sock(client),
        c.name,
        "freeze|0.5s|1s|{action: pause}",
        "throttle|2s|1.5s|{action: cpu, cpus: 0.1}",
        "crash|4s|1s|{action: kill}",
    )
    with WakeNoise() as noise:
        cost = change_cost(client)
        began = time.time()
        proc = faults("run", path, "--journal", str(journal), "--timeline", str(timeline))
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    time.sleep(0.5)
    windows = {w["name"]: w for w in json.loads(timeline.read_text())}
    freeze, throttle, crash = windows["freeze"], windows["throttle"], windows["crash"]
    assert all(w["error"] is None for w in windows.values()), windows
    t0 = freeze["planned_start"] - 0.5
    baseline = ticks.rate(t0 - 1.0, t0)
    assert baseline > 20, baseline
    # dockerd's own record of what it did to the ticker: pause, unpause, update, kill (the signal sent),
    # die (reaped) and start, each logged when done. A change reaches dockerd one call after its planned time
    # (~20 ms here), late by what a busy machine adds: the runner's timer waking late and the call taking
    # what calls take now. How long dockerd then takes to reap or start a container (0.1 s to over a
    # second on a busy CI disk) is dockerd's: the runner stamps a change when its call returns, after it.
    events = dockerd_events(client, c, began, time.time())
    assert {k: len(v) for k, v in events.items()} == {
        "pause": 1,
        "unpause": 1,
        "update": 2,
        "kill": 1,
        "die": 1,
        "start": 1,
    }, events
    (paused,), (unpaused,), (throttled_at, freed) = events["pause"], events["unpause"], events["update"]
    (killed,), (started,) = events["kill"], events["start"]
    busy = noise.worst + cost
    on_time = 0.1 + busy
    for w, applied, reverted in ((freeze, paused, unpaused), (throttle, throttled_at, freed), (crash, killed, started)):
        assert 0 <= applied - w["planned_start"] < on_time, (w, applied, noise.worst, cost)
        assert applied <= w["actual_start"], (w, applied)
        assert w["planned_end"] <= reverted <= w["actual_end"], (w, reverted)
    for w, reverted in ((freeze, unpaused), (throttle, freed)):
        assert reverted - w["planned_end"] < on_time, (w, reverted, noise.worst, cost)
    # a paused or killed container does no work until the window's end, when the revert is first called
    assert ticks.rate(paused + 0.05, freeze["planned_end"]) == 0
    # throttled to 0.1 CPU, as the kernel counts it: its quota of each 100 ms period, and a period's
    # quota at each end of the readings (held to its baseline's ticks instead, a busy machine's
    # slower baseline made a full 0.1 CPU look too fast)
    throttled_from = throttled_at + 0.2
    assert ticks.rate(throttled_from, throttle["planned_end"]) > 0
    cpus = ticks.cpus(throttled_from, throttle["planned_end"])
    assert 0 < cpus <= 0.1 + 0.02 / (throttle["planned_end"] - throttled_from - 0.04), cpus
    assert ticks.rate(killed + 0.05, crash["planned_end"]) == 0  # logged once the signal is sent
    # ticking again, not held down (the throttle's 0.1 CPU would be under 0.35 of it); how fast is the
    # machine's: the container is not in the timing tests' CPU group, and the suite's load shares its CPU
    after = ticks.rate(started + 0.1, time.time())
    assert after > 0.35 * baseline, (after, baseline)
    assert status(c) == "running"
    assert json.loads(journal.read_text()) == []
    assert Docker({"container": c.name, "host": sock(client)}).read_back()["containers"][0]["cpus"] is None


def wait_status(c, want: str, timeout: float = 10.0) -> float:
    deadline = time.monotonic() + timeout
    while status(c) != want:
        assert time.monotonic() < deadline, f"{c.name} is {c.status}, expected {want}"
        time.sleep(0.02)
    return time.monotonic()


@pytest.mark.timing
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_runner_leaves_nothing_paused_or_throttled(daemon, ticker, tmp_path, sig):
    client, _ = daemon
    c, _ = ticker
    other = sleeper(client, "llmc-other")
    try:
        path = tmp_path / "schedule.yaml"
        path.write_text(f"""faults:
  - {{name: freeze, kind: docker, target: {{container: {c.name}, host: "{sock(client)}"}}, at: 0s,
     duration: 60s, params: {{action: pause}}}}
  - {{name: throttle, kind: docker, target: {{container: {other.name}, host: "{sock(client)}"}}, at: 0s,
     duration: 60s, params: {{action: cpu, cpus: 0.25}}}}
""")
        journal = tmp_path / "journal.json"
        proc = faults("run", str(path), "--journal", str(journal))
        wait_for(lambda: status(c) == "paused", proc, f"{c.name} never paused")

        def throttled() -> bool:
            other.reload()
            return other.attrs["HostConfig"]["CpuQuota"] == 25_000

        wait_for(throttled, proc, f"{other.name} never throttled")
        saved = {e["name"]: e["saved"] for e in json.loads(journal.read_text())}
        assert saved["throttle"]["containers"][0]["cpu_quota"] == 0  # read before the throttle
        with WakeNoise() as noise:
            sent = time.monotonic()
            proc.send_signal(sig)
            proc.communicate(timeout=30)
            running = wait_status(c, "running") if sig == signal.SIGTERM else None
        if running is not None:
            # 1 s on a quiet machine, as much longer as the machine was busy (CPU work) plus a late wake
            assert running - sent < 1.0 * noise.slowdown + noise.worst, (running - sent, noise.slowdown, noise.worst)
        else:
            assert status(c) == "paused"  # nothing ran to undo it ...
            rec = faults("recover", "--journal", str(journal))
            out, err = rec.communicate(timeout=60)
            assert rec.returncode == 0, err
            assert "reverted docker freeze" in out
            assert "reverted docker throttle" in out
        assert status(c) == "running"
        assert json.loads(journal.read_text()) == []
        other.reload()
        assert other.attrs["HostConfig"]["CpuQuota"] in (0, -1)
    finally:
        other.remove(force=True)


def test_network_disconnect_cuts_the_container_off_then_reconnects(daemon, tmp_path):
    client, image = daemon
    net = client.networks.create(
        f"llmc-net-{uuid.uuid4().hex[:6]}",
        driver="bridge",
        internal=True,
        ipam=docker.types.IPAMConfig(
            pool_configs=[docker.types.IPAMPool(subnet="198.18.251.0/24", gateway="198.18.251.1")]
        ),
    )
    c = client.containers.run(
        image,
        ["httpd", "-f", "-p", "8080", "-h", "/"],
        detach=True,
        network=net.name,
        labels=ALLOW,
        name=f"llmc-web-{uuid.uuid4().hex[:6]}",
    )
    try:
        c.reload()
        ip = c.attrs["NetworkSettings"]["Networks"][net.name]["IPAddress"]
        wait_reachable(ip, True)
        d = Docker({"container": c.name, "host": sock(client)})
        params = {"action": "disconnect", "network": net.name}
        saved = d.save(params)
        d.apply("cut", params, saved)
        assert d.read_back()["containers"][0]["networks"] == []
        wait_reachable(ip, False)
        d.apply("cut", params, saved)  # applying again leaves one fault
        d.revert(saved)
        assert d.read_back()["containers"][0]["networks"] == [net.name]
        wait_reachable(ip, True)
        d.revert(saved)  # already reverted: still a success
    finally:
        c.remove(force=True)
        net.remove()


def wait_reachable(ip: str, want: bool, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((ip, 8080), timeout=0.3).close()
            ok = True
        except OSError:
            ok = False
        if ok == want:
            return
        assert time.monotonic() < deadline, f"{ip}:8080 reachable={ok}, expected {want}"
        time.sleep(0.05)


def test_only_allowed_containers_are_hit(daemon, tmp_path):
    client, _ = daemon
    c = sleeper(client, "llmc-plain", labels={"role": "backend"})
    try:
        path = schedule(tmp_path, sock(client), c.name, "freeze|0s|1s|{action: pause}")
        journal = tmp_path / "journal.json"
        proc = faults("run", path, "--journal", str(journal))
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 2
        assert err.strip() == (
            f"llmchaos: error: {path}:5: faults[0].target: cannot inject docker: container "
            f"{c.name} has no allowed label (llmchaos.allow=true; --allow-label)"
        )
        assert status(c) == "running"
        assert not journal.exists()  # nothing applied
        proc = faults("run", path, "--journal", str(journal), "--allow-label", "role=backend")
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert status(c) == "running"
    finally:
        c.remove(force=True)


def test_probe_says_what_this_host_can_inject():
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    out = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "probe"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(None, 1) for line in out.stdout.splitlines())
    assert set(lines) == {
        "sse",
        "gpu_clock",
        "netem",
        "tbf",
        "docker",
        "corrupt",
        "replica",
        "kv_link",
        "router",
        "cache_flush",
    }
    assert lines["tbf"] == "yes"
    assert lines["sse"] == "yes"
    for kind in (
        "corrupt",
        "replica",
        "kv_link",
        "router",
        "cache_flush",
    ):  # each needs only a reference server (a router) with
        assert lines[kind] == "yes"  # --admin-token, which a run probes
    assert lines["docker"].startswith("no: no Docker daemon at DOCKER_HOST")
    assert lines["netem"] in ("yes", "no: this kernel has no sch_netem (try: modprobe sch_netem)")


def test_a_leftover_whose_container_is_gone_is_dropped_and_said_so(daemon, tmp_path):
    client, _ = daemon
    c = sleeper(client, "llmc-gone")
    try:
        path = schedule(tmp_path, sock(client), c.name, "freeze|0s|60s|{action: pause}")
        journal = tmp_path / "journal.json"
        proc = faults("run", path, "--journal", str(journal))
        wait_for(lambda: status(c) == "paused", proc, f"{c.name} never paused")
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        c.remove(force=True)
    rec = faults("recover", "--journal", str(journal))
    out, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, out + err
    assert out.startswith("dropped docker freeze"), out  # it said "reverted": there was nothing to revert
    assert "nothing left to revert" in out
    assert json.loads(journal.read_text()) == []
