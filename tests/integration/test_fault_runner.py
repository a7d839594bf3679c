"""The fault runner against real targets (the SSE proxy and the reference server's simulated GPU):
windows on time, reverted at the end, on SIGTERM within 1 s, and by `faults recover` after SIGKILL."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import psutil
import pytest

from tests.integration.test_sse_proxy import FAULT, proxy
from tests.noise import WakeNoise
from tests.procs import ROOT, serve, stop, wait_for

TOKEN = "admin-secret"


@pytest.fixture(scope="module")
def targets() -> Iterator[tuple[str, str]]:
    with serve("--sim-time-scale", "0.1", "--admin-token", TOKEN) as server, proxy(server.url) as p:
        yield server.url, p


def write_schedule(tmp_path, server: str, p: str, at: str = "300ms", length: str = "1s") -> str:
    path = tmp_path / "schedule.yaml"
    path.write_text(f"""seed: 3
faults:
  - name: drop
    kind: sse
    target: {{proxy: "{p.split("//")[1]}"}}
    at: {at}
    duration: {length}
    params: {{drop_ratio: 0.5}}
  - name: slow-gpu
    kind: gpu_clock
    target: {{sim: "{server}", token_env: LLMCHAOS_ADMIN_TOKEN}}
    at: {at}
    duration: {length}
    params: {{graphics_mhz: 990}}
""")
    return str(path)


def state(server: str, p: str) -> tuple[bool, bool]:
    clocks = httpx.get(server + "/admin/device/clocks", headers={"authorization": f"Bearer {TOKEN}"}).json()
    return httpx.get(p + FAULT).json()["active"], clocks["locked"]


def apply_cost(server: str, p: str) -> float:
    """What applying both windows costs on this machine now: the proxy's fault set and cleared, the
    clock locked, read back and reset, from here; the slowest of three rounds (seconds)."""
    admin = {"authorization": f"Bearer {TOKEN}"}
    took = []
    for _ in range(3):
        t = time.monotonic()
        httpx.put(p + FAULT, json={"name": "probe", "drop_ratio": 0.0}).raise_for_status()
        httpx.delete(p + FAULT).raise_for_status()
        httpx.put(server + "/admin/device/clocks", headers=admin, json={"graphics_mhz": 990}).raise_for_status()
        httpx.get(server + "/admin/device/clocks", headers=admin).raise_for_status()
        httpx.delete(server + "/admin/device/clocks", headers=admin).raise_for_status()
        took.append(time.monotonic() - t)
    return max(took)


def start(schedule: str, journal, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "faults", "run", schedule, "--journal", str(journal), *extra],
        cwd=ROOT,
        env={**os.environ, "LLMCHAOS_ADMIN_TOKEN": TOKEN},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_active(server: str, p: str, proc: subprocess.Popen) -> None:
    """Until both windows are applied: however long the runner takes to start, it ends by itself."""
    wait_for(lambda: state(server, p) == (True, True), proc, "faults never became active")


@pytest.mark.timing
def test_windows_apply_on_time_and_revert(tmp_path, targets):
    server, p = targets
    journal, timeline = tmp_path / "j.json", tmp_path / "timeline.json"
    with WakeNoise() as noise:
        cost = apply_cost(server, p)
        proc = start(write_schedule(tmp_path, server, p), journal, "--timeline", str(timeline))
        wait_active(server, p, proc)
        assert len(json.loads(journal.read_text())) == 2  # written before applying
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert state(server, p) == (False, False)
    assert json.loads(journal.read_text()) == []
    windows = json.loads(timeline.read_text())
    assert {w["name"] for w in windows} == {"drop", "slow-gpu"}
    # 50 ms on a quiet machine; on a busy one, plus the runner's timer waking late and its calls
    # taking what they took from here in the same test
    late = 0.05 + noise.worst + cost
    for w in windows:
        assert abs(w["actual_start"] - w["planned_start"]) < late, (w, noise.worst, cost)
        assert abs(w["actual_end"] - w["planned_end"]) < late, (w, noise.worst, cost)


@pytest.mark.timing
def test_sigterm_reverts_within_a_second(tmp_path, targets):
    server, p = targets
    proc = start(write_schedule(tmp_path, server, p, length="60s"), tmp_path / "j.json")
    wait_active(server, p, proc)
    with WakeNoise() as noise:
        cost = apply_cost(server, p)
        t = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        while state(server, p) != (False, False):
            time.sleep(0.01)
        took = time.monotonic() - t
    # within 1 s on a quiet machine; on a busy one plus a late wake and the calls' cost here and now
    assert took < 1.0 + noise.worst + cost, ("not reverted within 1 s of SIGTERM", took, noise.worst, cost)
    proc.wait(10)


def recover(journal, token: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LLMCHAOS_ADMIN_TOKEN"}
    return subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "recover", "--journal", str(journal)],
        cwd=ROOT,
        env={**env, "LLMCHAOS_ADMIN_TOKEN": token} if token else env,
        capture_output=True,
        text=True,
    )


def test_sigkill_leaves_the_journal_and_recover_cleans_up(tmp_path, targets):
    server, p = targets
    journal = tmp_path / "j.json"
    proc = start(write_schedule(tmp_path, server, p, length="60s"), journal)
    wait_active(server, p, proc)
    proc.kill()
    proc.wait(10)
    assert state(server, p) == (True, True)
    assert len(json.loads(journal.read_text())) == 2
    r = recover(journal, token=TOKEN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("reverted") == 2
    assert state(server, p) == (False, False)
    assert json.loads(journal.read_text()) == []


def test_probe_says_what_cannot_be_injected(tmp_path, targets):
    _server, _p = targets
    path = tmp_path / "gpu.yaml"
    path.write_text(
        "faults:\n  - {name: real-gpu, kind: gpu_clock, target: {gpu: 0}, at: 0s, duration: 1s, "
        "params: {graphics_mhz: 600}}\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "probe", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 1
    assert "real-gpu" in r.stdout
    assert "NO: no NVIDIA GPU here" in r.stdout
    run = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "run", str(path), "--journal", str(tmp_path / "j.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert "cannot inject gpu_clock: no NVIDIA GPU here" in run.stderr
    assert not (tmp_path / "j.json").exists()


def test_a_clock_locked_before_the_run_is_locked_again_after(tmp_path, targets):
    server, p = targets
    admin = {"authorization": f"Bearer {TOKEN}"}
    httpx.put(server + "/admin/device/clocks", json={"graphics_mhz": 1200}, headers=admin).raise_for_status()
    try:
        proc = start(write_schedule(tmp_path, server, p, at="0s", length="500ms"), tmp_path / "j.json")
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        clocks = httpx.get(server + "/admin/device/clocks", headers=admin).json()
        assert clocks["locked"]
        assert clocks["graphics_mhz"] == 1200
    finally:
        httpx.delete(server + "/admin/device/clocks", headers=admin)


def test_an_unwritable_journal_is_refused_before_anything_is_applied(tmp_path, targets):
    server, p = targets
    (tmp_path / "file").write_text("")
    journal = tmp_path / "file" / "j.json"  # under a regular file: its directory cannot be made
    proc = start(write_schedule(tmp_path, server, p, at="0s", length="2s"), journal)
    seen = set()
    while proc.poll() is None:
        seen.add(state(server, p))
        time.sleep(0.02)
    _, err = proc.communicate()
    assert proc.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"{journal}: the fault journal cannot be written" in err
    assert seen <= {(False, False)}
    assert state(server, p) == (False, False)


def peak_rss(proc: subprocess.Popen) -> int:
    """The highest resident set size seen while `proc` ran (sampled every 20 ms), then waits for it."""
    ps, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, ps.memory_info().rss)
        time.sleep(0.02)
    return peak


def many_windows(tmp_path, server: str, p: str, n: int) -> str:
    """`n` faults of one 5 ms window each, every 20 ms on the proxy and 10 ms later on the simulated GPU
    (a window's two journal writes and its HTTP calls take ~10-25 ms here: a busy machine runs them late)."""
    path = tmp_path / f"many-{n}.yaml"
    faults = [
        f"  - {{name: drop-{i}, kind: sse, target: {{proxy: '{p.split('//')[1]}'}}, at: {i * 20}ms, "
        f"duration: 5ms, params: {{drop_ratio: 0.5}}}}\n"
        f"  - {{name: gpu-{i}, kind: gpu_clock, target: {{sim: '{server}'}}, at: {i * 20 + 10}ms, "
        f"duration: 5ms, params: {{graphics_mhz: 990}}}}\n"
        for i in range(n // 2)
    ]
    path.write_text("faults:\n" + "".join(faults))
    return str(path)


def test_a_thousand_short_windows_all_run_are_all_reverted_in_bounded_memory(tmp_path, targets):
    server, p = targets
    reference = start(many_windows(tmp_path, server, p, 2), tmp_path / "ref.json")
    reference_rss = peak_rss(reference)
    assert reference.returncode == 0, reference.communicate()
    journal, timeline = tmp_path / "j.json", tmp_path / "timeline.json"
    proc = start(many_windows(tmp_path, server, p, 1000), journal, "--timeline", str(timeline))
    rss = peak_rss(proc)
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    windows = json.loads(timeline.read_text())
    assert len(windows) == 1000
    assert [w for w in windows if w["error"] or w["actual_start"] is None or w["actual_end"] is None] == []
    for kind in ("sse", "gpu_clock"):  # one after another on each target: late when the machine is busy, never early
        ran = sorted((w["actual_start"], w["actual_end"], w["planned_start"]) for w in windows if w["kind"] == kind)
        assert all(start >= planned for start, _, planned in ran)
        assert all(end <= next_start for (_, end, _), (next_start, _, _) in itertools.pairwise(ran))
    assert json.loads(journal.read_text()) == []
    assert state(server, p) == (False, False)
    assert rss < reference_rss + 30_000_000, (rss, reference_rss)  # it took 723 MB


HUNG_PROXY = """
import http.server, json, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"active": False}).encode()
        self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_PUT(self):
        print("put", flush=True); time.sleep(60)
    do_DELETE = do_PUT
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H); print(s.server_address[1], flush=True); s.serve_forever()
"""


@pytest.mark.timing
def test_sigterm_during_a_hung_apply_ends_the_run_within_its_deadline_and_says_what_is_left(tmp_path):
    hung = subprocess.Popen([sys.executable, "-c", HUNG_PROXY], stdout=subprocess.PIPE, text=True)
    try:
        port = int(hung.stdout.readline())
        path, journal = tmp_path / "s.yaml", tmp_path / "j.json"
        path.write_text(
            f"faults:\n  - {{name: drop, kind: sse, target: {{proxy: '127.0.0.1:{port}'}}, at: 0s, duration: 60s, "
            "params: {drop_ratio: 0.5}}\n"
        )
        proc = start(str(path), journal)
        assert hung.stdout.readline().strip() == "put"  # the apply is in flight and will not be answered
        with WakeNoise() as noise:
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            took = time.monotonic() - sent
        # the proxy injector's HTTP timeout is 5 s: it took 6 s
        assert took < min(5.0, 3.0 + 2 * noise.worst), (took, noise.worst)
        assert proc.returncode == 1, err
        assert "left in the journal" in err
        assert [e["name"] for e in json.loads(journal.read_text())] == ["drop"]
    finally:
        stop(hung)


def test_recover_says_reverted_only_once_the_clock_reads_back_as_before(tmp_path, targets):
    server, p = targets
    journal = tmp_path / "j.json"
    proc = start(write_schedule(tmp_path, server, p, length="60s"), journal)
    wait_active(server, p, proc)
    proc.kill()
    proc.wait(10)
    refused = recover(journal, token=None)  # the admin API refuses without the token
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "could not revert gpu_clock slow-gpu" in refused.stdout
    assert "reverted gpu_clock" not in refused.stdout
    assert state(server, p) == (False, True)  # the proxy's fault went; the clock is still locked
    assert [e["name"] for e in json.loads(journal.read_text())] == ["slow-gpu"]
    r = recover(journal, token=TOKEN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("reverted gpu_clock slow-gpu")
    assert state(server, p) == (False, False)
    assert json.loads(journal.read_text()) == []


def test_a_clock_outside_the_devices_range_is_refused_before_the_run(tmp_path, targets):
    server, p = targets
    path, journal = tmp_path / "fast.yaml", tmp_path / "j.json"
    path.write_text(
        f"faults:\n  - name: overclock\n    kind: gpu_clock\n    target: {{sim: '{server}'}}\n    at: 0s\n"
        "    duration: 1s\n    params: {graphics_mhz: 5000}\n"  # within any GPU's sane range, above this device's
    )
    run = start(str(path), journal)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"{path}:7: faults[0].params.graphics_mhz: 5000 MHz is outside this device's range" in err
    assert not journal.exists()
    assert state(server, p) == (False, False)
    probe = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "faults", "probe", str(path)],
        cwd=ROOT,
        env={**os.environ, "LLMCHAOS_ADMIN_TOKEN": TOKEN},
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 1, probe.stdout + probe.stderr
    assert "NO: 5000 MHz is outside this device's range" in probe.stdout


def test_a_range_locks_the_simulated_device_at_its_top_and_each_end_is_checked(tmp_path, targets):
    """The seeds' drill, `nvidia-smi -lgc 500,800`: the simulated device (no boost modelled) runs at
    800 while the window is on and is restored after; a range whose top the device cannot reach is
    refused before the run, naming the field."""
    server, p = targets
    path, journal = tmp_path / "range.yaml", tmp_path / "j.json"
    window = f"faults:\n  - name: drill\n    kind: gpu_clock\n    target: {{sim: '{server}'}}\n    at: 0s\n"
    path.write_text(window + "    duration: 3s\n    params: {graphics_mhz: [500, 800]}\n")
    admin = {"authorization": f"Bearer {TOKEN}"}
    run = start(str(path), journal)
    clocks: dict = {}

    def locked() -> bool:
        clocks.update(httpx.get(server + "/admin/device/clocks", headers=admin).json())
        return clocks["locked"]

    wait_for(locked, run, "never locked")
    assert clocks["graphics_mhz"] == 800
    _, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    assert state(server, p) == (False, False)
    path.write_text(window + "    duration: 1s\n    params: {graphics_mhz: [500, 5000]}\n")
    run = start(str(path), journal)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 2, err
    assert f"{path}:7: faults[0].params.graphics_mhz: 5000 MHz is outside this device's range" in err
    assert state(server, p) == (False, False)


def test_a_journal_damaged_during_the_run_still_leaves_every_fault_reverted(tmp_path, targets):
    server, p = targets
    journal = tmp_path / "j.json"
    proc = start(write_schedule(tmp_path, server, p, length="60s"), journal)
    wait_active(server, p, proc)
    journal.write_text('[{"id": ')  # someone truncated it
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "reverted, but the journal could not be updated" in err
    assert state(server, p) == (False, False)
    assert len(list(tmp_path.glob("j.json.damaged-*"))) == 1


def test_a_clock_the_device_refuses_is_never_a_silent_success(tmp_path, targets):
    server, p = targets
    path, journal = tmp_path / "slow.yaml", tmp_path / "j.json"
    path.write_text(  # sane for a GPU, below the simulated device's minimum (210 MHz), which it may not report
        f"faults:\n  - {{name: crawl, kind: gpu_clock, target: {{sim: '{server}'}}, at: 0s, duration: 300ms, "
        "params: {graphics_mhz: 150}}\n"
    )
    run = start(str(path), journal)
    _, err = run.communicate(timeout=30)
    assert run.returncode in (1, 2), err  # refused before the run (2) or a failed window (1)
    assert "crawl" in err or "graphics_mhz" in err, err
    assert state(server, p) == (False, False)
