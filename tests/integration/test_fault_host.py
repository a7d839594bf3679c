"""The fault host on loopback, against the reference server's simulated device: its applier applies,
renews, reverts by itself and sweeps; a Locust master leases it a window and labels requests by its
acknowledgements; a master refuses in one line a schedule whose host is away or cannot take its
target; `llmchaos stack up --fault-host` starts one. (The network-namespace drills, with qdiscs, a
killed master, a cut link and a killed host, are tests/system/test_fault_hosts.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from faults.allow import Allowlist
from faults.host.agent import Agent
from faults.host.applier import Applier
from faults.host.messages import Desired, Lease
from faults.host.reach import Reach
from faults.journal import Journal
from tests.integration.conftest import math_bound
from tests.integration.loadtest_helpers import only_run, report, summary
from tests.integration.test_stack import assert_all_gone, services, stack
from tests.procs import ROOT, free_port, serve, stop

TOKEN = "fault-host-token"
LOCUST = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "--only-summary"]


def clocks(url: str) -> dict:
    return httpx.get(url + "/admin/device/clocks", headers={"authorization": f"Bearer {TOKEN}"}).json()


def lease(seq: int, url: str, expires_in: float, ends: bool = False, mhz: int = 660) -> Lease:
    window = Desired("slow#0", "slow", "gpu_clock", {"sim": url}, {"graphics_mhz": mhz}, expires_in, ends)
    return Lease("boot", "session", seq, time.time(), [window])


def test_the_applier_applies_renews_reverts_by_itself_and_sweeps(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
    with serve("--admin-token", TOKEN) as server:
        journal = Journal(tmp_path / "journal.json")
        ex = Applier(Reach(Allowlist(), sims=frozenset({server.url})), journal, max_lease_s=10)
        ex.match(lease(1, server.url, 0.6), time.monotonic())
        assert clocks(server.url)["locked"] is True  # read back before it counted as applied
        assert journal.entries()[0]["lease"] == {"session": "session", "window": "slow#0"}
        ex.match(lease(2, server.url, 0.6), time.monotonic())  # renewed: still one fault, later expiry
        assert len(journal.entries()) == 1
        while ex.held:
            ex.tick()
            time.sleep(0.01)
        assert clocks(server.url)["locked"] is False
        (rec,) = ex.records("session")
        assert rec.why.startswith("lease expired: no renewal from the master for 0.")
        assert rec.spans[0][1] is not None
        assert journal.entries() == []
        ex.match(lease(3, server.url, 1.0, ends=True), time.monotonic())  # long enough to be held on a busy host
        assert ex.held, ex.records("session")
        while ex.held:
            ex.tick()
            time.sleep(0.01)
        assert ex.records("session")[0].why == "its window ended (the last lease said when)", ex.records("session")
        capped = Applier(Reach(Allowlist(), sims=frozenset({server.url})), Journal(tmp_path / "capped.json"), 0.3)
        capped.match(lease(1, server.url, 5, ends=True), time.monotonic())  # it ends past this host's --max-lease
        while capped.held:
            capped.tick()
            time.sleep(0.01)
        assert capped.records("session")[0].why.startswith("lease expired: no renewal from the master for 0.")
        ex.match(lease(4, "http://127.0.0.1:9", 5), time.monotonic())  # not allowed here
        assert ex.records("session")[0].error.startswith("refused: simulated device http://127.0.0.1:9 is not")
        ex.match(lease(5, server.url, 5, mhz=20_000), time.monotonic())  # the device refuses it
        assert ex.records("session")[0].error.startswith("not applied: simulated device refused (400)")
        assert (ex.held, journal.entries(), clocks(server.url)["locked"]) == ({}, [], False)
        assert [n["event"] for n in journal.notes()] == ["applied", "reverted", "applied", "reverted", "refused"]
        # a run of the fault host killed with the lock on: the next one sweeps it at start
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        httpx.put(
            server.url + "/admin/device/clocks",
            json={"graphics_mhz": 700},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        saved = {"graphics_mhz": 1980, "locked": False}
        entry = journal.add(
            "slow",
            "gpu_clock",
            {"sim": server.url},
            {"graphics_mhz": 700},
            saved,
            {"session": "s2", "window": "slow#1"},
        )
        entries = json.loads(journal.path.read_text())
        entries[0]["pid"] = int(gone.stdout)
        journal.path.write_text(json.dumps(entries))
        assert Applier(Reach(Allowlist(), sims=frozenset({server.url})), journal, 10).sweep() == [
            f"reverted gpu_clock slow on {{'sim': '{server.url}'}}"
        ]
        assert clocks(server.url)["locked"] is False
        assert entry
        assert journal.entries() == []
        assert journal.notes()[-1]["why"].startswith("swept at start")


def test_a_step_of_the_masters_wall_clock_makes_no_lease_stale(tmp_path):
    # defect 6 of issue 34: the master's wall clock stepped back (NTP, a VM resumed) and the host judged
    # every lease late by the step, refusing them all for up to 120 s
    agent = Agent("127.0.0.1:9", "gpu-1", b"s" * 24, Applier(Reach(Allowlist()), Journal(tmp_path / "j.json"), 10))
    acks: list = []
    agent._send = lambda kind, payload: acks.append(payload)  # type: ignore[method-assign]
    try:
        wall, mono = time.time(), time.monotonic()
        for k in range(6):
            step = -60.0 if k >= 3 else 0.0  # a minute back from the fourth lease on
            lease = Lease(agent.boot, "session", k, wall + k + step, [], sent_mono=mono + k)
            agent._lease(lease, wall + k, mono + k + 0.002)
        late = Lease(agent.boot, "session", 6, wall + 6 - 60, [], sent_mono=mono + 6)
        agent._lease(late, wall + 8, mono + 8)  # two seconds late on the master's own clock: stale still
    finally:
        agent.sock.close()
    assert [a.stale for a in acks] == [False] * 6 + [True]
    assert agent.refused == 1


@contextmanager
def fault_host(
    port: int, secret: Path, journal: Path, *allow: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen]:
    cmd = [sys.executable, "-m", "llmchaos.cli", "faults", "host", "--master-host", "127.0.0.1"]
    cmd += ["--master-port", str(port), "--name", "gpu-1", "--secret-file", str(secret), "--journal", str(journal)]
    log = open(journal.with_suffix(".log"), "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*cmd, *allow], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc
    finally:
        stop(proc)
        log.close()


def schedule(tmp: Path, url: str, mhz: int = 660) -> Path:
    path = tmp / "schedule.yaml"
    path.write_text(f"""faults:
  - name: gpu-660
    kind: gpu_clock
    target: {{host: gpu-1, sim: "{url}"}}
    at: 3s
    duration: 3s
    params: {{graphics_mhz: {mhz}}}
""")
    return path


def master(
    port: int, url: str, plan: Path, secret: Path | None, *more: str, timeout: float = 90
) -> subprocess.CompletedProcess:
    cmd = [*LOCUST, "--master", "--master-bind-port", str(port), "--expect-workers", "1", "--host", url]
    cmd += [
        "--langs",
        "en",
        "--max-tokens",
        "24",
        "--schedule",
        str(plan),
        "--fault-journal",
        str(plan.parent / "mj.json"),
    ]
    cmd += ["--fault-secret-file", str(secret)] if secret else []
    return subprocess.run([*cmd, *more], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(os.urandom(24).hex())
    return path


@pytest.mark.timing  # the lock's ITL against the baseline's
def test_a_master_leases_the_window_and_labels_requests_by_its_acknowledgements(tmp_path, secret, monkeypatch):
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
    port = free_port()
    profile = math_bound(tmp_path)  # steps all math: the lock slows ITL in proportion (the default's decode hardly)
    # the host's NVML is a stand-in GPU drawing a known 300 W: the energy read with its acks is known
    standin = {**os.environ, "PYTHONPATH": f"{ROOT}/tests/servers/nvml:{ROOT}", "LLMCHAOS_STANDIN_WATTS": "300"}
    with serve("--profile", profile, "--admin-token", TOKEN, "--sim-time-scale", "0.3") as server:
        with fault_host(port, secret, tmp_path / "host.json", "--allow-sim", server.url, env=standin):
            worker = subprocess.Popen([*LOCUST[:5], "--worker", "--master-port", str(port)], cwd=ROOT)
            try:
                done = master(
                    port,
                    server.url,
                    schedule(tmp_path, server.url),
                    secret,
                    "-u",
                    "4",
                    "-r",
                    "4",
                    "-t",
                    "9s",
                    "--results-dir",
                    str(tmp_path / "results"),
                    "--energy-from",
                    "host:gpu-1",
                )
            finally:
                worker.wait(30)
        assert done.returncode == 0, done.stderr[-3000:]
        assert clocks(server.url)["locked"] is False
    run, _, requests = only_run(tmp_path / "results")
    (w,) = run["faults"]
    assert (w["host"], w["error"], w["unconfirmed"]) == ("gpu-1", None, [])
    labelled = [q for q in requests if q["phase"] == "gpu-660"]
    assert labelled
    assert all(w["actual_start"] <= q["intended"] < w["actual_end"] for q in labelled)
    assert not [q for q in requests if q["phase"] != "gpu-660" and w["actual_start"] <= q["intended"] < w["actual_end"]]
    locked, unlocked = summary(run, "en", "itl", "gpu-660"), summary(run, "en", "itl", "baseline")
    assert locked["p50"] > 2 * unlocked["p50"], (locked, unlocked, w, (tmp_path / "host.log").read_text()[-2000:])
    printed = report(tmp_path / "results")
    assert "fault gpu-660 (gpu_clock) on gpu-1: intended " in printed
    assert "fault host gpu-1: clock offset " in printed
    # the host's energy: read with every ack (a second apart, and right after the apply and revert),
    # put on the master's clock, 300 W x the time covered
    e = run["energy"]
    assert (e["source"], e["origin"], e["gpus"]) == ("measured", "fault host gpu-1 (NVML)", ["GPU-standin-0000"])
    lo, hi = e["covered"]
    assert e["energy_j"] == pytest.approx(300 * (hi - lo), rel=0.01)
    assert e["interval_s"] <= 1.05
    edges = sorted({b["start"] for b in e["blocks"]} | {b["end"] for b in e["blocks"]})
    for t in (w["actual_start"], w["actual_end"]):
        assert min(abs(x - t) for x in edges) < 0.1, (t, edges)
    phases = {c["phase"] for c in run["cost"] if c["j_per_token"] is not None}
    assert {"baseline", "gpu-660"} <= phases


def test_the_master_refuses_before_any_load_in_one_line(tmp_path, secret, monkeypatch):
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
    monkeypatch.delenv("LLMCHAOS_FAULT_SECRET", raising=False)
    port = free_port()
    with serve("--admin-token", TOKEN) as server:
        plan = schedule(tmp_path, server.url)
        away = master(port, server.url, plan, secret, "--fault-host-wait", "1")
        nosecret = master(port, server.url, plan, None)
        single = subprocess.run(
            [*LOCUST, "--host", server.url, "--schedule", str(plan)], cwd=ROOT, capture_output=True, text=True
        )
        with fault_host(port, secret, tmp_path / "host.json", "--allow-sim", "http://127.0.0.1:9"):
            elsewhere = master(port, server.url, plan, secret)
        with fault_host(port, secret, tmp_path / "host.json", "--allow-sim", server.url):
            too_slow = master(port, server.url, schedule(tmp_path, server.url, mhz=100), secret)
        with fault_host(port, secret, tmp_path / "host.json", "--allow-sim", server.url, "--max-lateness", "1.5"):
            lapsing = master(port, server.url, plan, secret)  # the default lease, 3 s: under 2 s + 1.5 s
        assert clocks(server.url)["locked"] is False  # nothing was applied
    lines = {
        away: f"{plan}:4: faults[0].target.host: fault host 'gpu-1' is not connected (waited 1s for it",
        nosecret: "--fault-secret-file: the fault hosts' secret: give a secret file, or the secret in LLMCHAOS_",
        single: f"{plan}:4: faults[0].target.host: fault host 'gpu-1' joins a Locust master: run with --master",
        elsewhere: f"{plan}:4: faults[0].target: cannot inject gpu_clock on fault host 'gpu-1': simulated device "
        f"{server.url} is not in this host's allowlist (--allow-sim)",
        too_slow: f"{plan}:7: faults[0].params.graphics_mhz: cannot inject gpu_clock on fault host 'gpu-1': 100 MHz",
        lapsing: "--fault-lease: a lease of 3s would lapse on fault host 'gpu-1' between renewals: it needs two "
        "renewals (2s) and the lateness it allows (1.5s)",
    }
    for done, line in lines.items():
        assert done.returncode == 2, done.stderr[-2000:]
        errors = [x for x in done.stderr.splitlines() if x.startswith("llmchaos: error:")]
        assert len(errors) == 1, done.stderr[-2000:]
        assert errors[0].startswith(f"llmchaos: error: {line}"), errors
        assert "Traceback" not in done.stderr


def test_a_master_that_refuses_tells_its_workers_to_quit(tmp_path, secret):
    # defect 8 of issue 34: its --processes worker stayed connected until Locust's heartbeat timeout
    # (60 s), and a master restarted within that minute got a stale worker
    plan = schedule(tmp_path, "http://127.0.0.1:9")
    cmd = [*LOCUST, "--processes", "1", "--host", "http://127.0.0.1:9", "--schedule", str(plan)]
    cmd += ["--fault-secret-file", str(secret), "--fault-host-wait", "1", "--fault-journal", str(tmp_path / "j.json")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=40)  # under the 60 s it had waited
    assert done.returncode == 2, done.stderr[-2000:]
    assert "fault host 'gpu-1' is not connected" in done.stderr
    assert "Got quit message from master" in done.stderr  # the worker's own log: told, not timed out


@pytest.mark.timing
def test_stack_up_starts_a_fault_host_that_the_masters_schedule_reaches(tmp_path):
    """`stack up --fault-host` starts a fault host beside the server; the master's windows for it are applied there.

    Long (about 30 s here): `stack up` starts its processes and the fault host one after another, each waited for,
    the load runs at least 8 s (its windows are 3 s in, for 3 s), and `down` stops them one at a time."""
    state, port, proxy_port = tmp_path / "stack", free_port(), free_port()
    plan = schedule(tmp_path, f"http://127.0.0.1:{port}")
    with plan.open("a") as f:  # the stack's proxy, on the fault host too: its allowlist has it
        f.write(f"""  - name: drops
    kind: sse
    target: {{host: gpu-1, proxy: "127.0.0.1:{proxy_port}"}}
    at: 3s
    duration: 3s
    params: {{drop_ratio: 0.15}}
""")
    up = stack(
        "up",
        "--state-dir",
        str(state),
        "--workers",
        "1",
        "--langs",
        "en",
        "--server-port",
        str(port),
        "--proxy-port",
        str(proxy_port),
        "--admin-token",
        TOKEN,
        "--fault-host",
        "gpu-1",
        "--locust-args",
        f"--schedule {plan}",
        "--no-grafana",
    )
    started = services(state) if (state / "state.json").exists() else {}
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "fault-host-gpu-1" in started
        assert oct((state / "fault-secret").stat().st_mode & 0o777) == "0o600"
        assert "--secret-file" in started["fault-host-gpu-1"]["cmd"]
        master_url = started["locust-master"]["url"]
        assert httpx.post(master_url + "/swarm", data={"user_count": 2, "spawn_rate": 2}, timeout=10).json()["success"]
        seen: set[tuple[str, str]] = set()  # the faults tab's (host, state) of the window, through it
        start = time.monotonic()  # the window is 3 s in, for 3 s: poll past it, longer on a slow machine
        while time.monotonic() < start + 8 or not {"applied (acknowledged)"} & {st for _, st in seen}:
            assert time.monotonic() < start + 60, seen
            seen |= {
                (r["host"], r["state"]) for r in httpx.get(master_url + "/llmchaos/tab", timeout=10).json()["faults"]
            }
            time.sleep(0.2)
        workers = httpx.get(master_url + "/stats/requests", timeout=10).json()["worker_count"]
        assert httpx.post(master_url + "/stop", timeout=10).status_code == 200
    finally:
        down = stack("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert_all_gone(started)
    assert workers == 1  # the fault host joined the master's port, but is no worker of it
    assert any(re.fullmatch(r"gpu-1 \([+-]\d+\.\d\d ± \d+\.\d\d ms\)", h) for h, _ in seen), seen
    assert "applied (acknowledged)" in {state for _, state in seen}, seen
    (run_dir,) = (state / "results").iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    assert sorted(w["name"] for w in run["faults"]) == ["drops", "gpu-660"]
    for w in run["faults"]:
        assert (w["host"], w["error"]) == ("gpu-1", None), w
        assert w["actual_start"] is not None
        assert w["actual_end"] is not None
    assert run["fault_hosts"][0]["connected"] is True


def test_stack_up_joins_a_fault_host_to_a_master_and_says_when_one_cannot_start(tmp_path, secret):
    state = tmp_path / "stack"
    join = ["up", "--state-dir", str(state), "--worker-host", "127.0.0.1:9", "--workers", "0"]
    join += ["--fault-host", "gpu-1", "--fault-secret-file", str(secret)]
    refused = stack(*join)  # allowed nothing: it exits at once, and up says so rather than "running"
    assert refused.returncode == 1, refused.stdout
    assert "fault-host-gpu-1 exited" in refused.stdout
    assert "a fault host allowed nothing can do nothing" in refused.stdout
    assert "running" not in stack("status", "--state-dir", str(state)).stdout
    up = stack(*join, "--fault-host-args", "--allow-sim http://127.0.0.1:9")
    started = services(state)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "--secret-file" in started["fault-host-gpu-1"]["cmd"]
        assert (
            "joining 127.0.0.1:9; may touch sims http://127.0.0.1:9"
            in Path(started["fault-host-gpu-1"]["log"]).read_text()
        )
    finally:
        down = stack("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert_all_gone(started)
