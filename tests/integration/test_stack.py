"""`llmchaos stack up`, a short run through it (started from the master's web UI, scraped by the
stack's Prometheus), `stack down`: every process it started gone, every port closed, the results
written; `status` says what runs where before, nothing after."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from tests.procs import ROOT


def stack(*args: str, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "stack", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=preexec_fn,
    )


def services(state: Path) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads((state / "state.json").read_text())["services"]}


def port_open(url: str) -> bool:
    host, port = url.split("//")[1].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def short_run(master: str, prometheus: str, ask=httpx) -> float:
    """Start 4 users from the web UI, wait for the stack's Prometheus to see ok requests, stop; the
    count it saw."""
    r = ask.post(master + "/swarm", data={"user_count": 4, "spawn_rate": 4}, timeout=10)
    assert r.json()["success"], r.text
    deadline = time.monotonic() + 60
    while True:
        q = 'sum(llmchaos_requests_total{job="llmchaos",outcome="ok"})'
        result = ask.get(prometheus + "/api/v1/query", params={"query": q}, timeout=10).json()["data"]["result"]
        if result and float(result[0]["value"][1]) > 0:
            break
        assert time.monotonic() < deadline, "no requests scraped in 60 s"
        time.sleep(0.5)
    assert ask.post(master + "/stop", timeout=10).status_code == 200
    return float(result[0]["value"][1])


def assert_all_gone(started: dict[str, dict]) -> None:
    for s in started.values():
        alive = psutil.pid_exists(s["pid"]) and abs(psutil.Process(s["pid"]).create_time() - s["started"]) < 0.01
        assert not alive, s["name"]
        if s["url"]:
            assert not port_open(s["url"]), s["name"]


def test_up_a_short_run_and_down_leave_nothing(tmp_path):
    """`stack up` starts its six services, a short run through it is scraped, and `down` leaves nothing behind.

    Long (about 27 s here): `up` starts the six processes one after another, each waited for until it answers, the
    run lasts until Prometheus has scraped ok requests, and `down` stops them one at a time, the master writing its
    results on the way."""
    state = tmp_path / "stack"
    up = stack("up", "--state-dir", str(state), "--workers", "1", "--langs", "en,de", "--scrape-interval", "1")
    started = services(state) if (state / "state.json").exists() else {}
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert set(started) == {"server-1", "proxy", "pushgateway", "locust-master", "prometheus", "locust-worker-1"}
        status = stack("status", "--state-dir", str(state))
        assert status.returncode == 0
        for name, s in started.items():
            assert f"{name} " in status.stdout
            assert s["url"] in status.stdout
        assert "Grafana not started" in up.stdout  # no Grafana on this machine: links to Prometheus instead
        links = (state / "panels.md").read_text()
        assert links.count("](http://127.0.0.1:") > 60
        assert short_run(started["locust-master"]["url"], started["prometheus"]["url"]) > 0
    finally:
        down = stack("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert_all_gone(started)
    assert stack("status", "--state-dir", str(state)).stdout.startswith("no stack")
    (run_dir,) = (state / "results").iterdir()  # the master wrote its results on the way down
    run = json.loads((run_dir / "run.json").read_text())
    assert sum(o["count"] for o in run["outcomes"] if o["outcome"] == "ok") > 0
