"""A Locust run against the reference server running in a container, paused for two seconds on
schedule: requests that start in the pause wait it out, and run.json says so by phase."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.integration.loadtest_helpers import locust, only_run, summary
from tests.noise import WakeNoise
from tests.procs import ROOT, free_port
from tests.system.dockerd import ALLOW, change_cost, sock

PAUSE_S = 2.0


def python_mounts() -> dict[str, dict[str, str]]:
    """The host's Python, our virtualenv and checkout, read-only: the busybox image has no Python."""
    paths = {"/usr", "/lib", "/lib64", sys.base_prefix, str(ROOT)}
    return {p: {"bind": p, "mode": "ro"} for p in paths if os.path.exists(p)}


@pytest.mark.timing
def test_requests_in_a_paused_backend_wait_out_the_pause(daemon, tmp_path: Path):
    client, image = daemon
    port = free_port()
    server = client.containers.run(
        image,
        [sys.executable, "-m", "llmchaos.cli", "serve", "--port", str(port), "--sim-time-scale", "0.3"],
        detach=True,
        network_mode="host",
        labels=ALLOW,
        volumes=python_mounts(),
        working_dir=str(ROOT),
        environment={"HOME": "/tmp"},
        name=f"llmc-backend-{uuid.uuid4().hex[:6]}",
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            server.reload()
            assert server.status == "running", server.logs()[-2000:]
            assert time.monotonic() < deadline, server.logs()[-2000:]
            time.sleep(0.2)
        schedule = tmp_path / "schedule.yaml"
        schedule.write_text(f"""faults:
  - name: backend-frozen
    kind: docker
    target: {{container: {server.name}, host: "{sock(client)}"}}
    at: 3s
    duration: {PAUSE_S}s
    params: {{action: pause}}
""")
        with WakeNoise() as noise:
            cost = change_cost(client)
            proc = locust(
                "--host",
                url,
                "--results-dir",
                str(tmp_path / "results"),
                "--rate",
                "6",
                "-u",
                "40",
                "-t",
                "9s",
                "--langs",
                "en",
                "--max-tokens",
                "16",
                "--schedule",
                str(schedule),
                "--fault-journal",
                str(tmp_path / "journal.json"),
            )
        assert proc.returncode == 0, proc.stderr[-3000:]
        server.reload()
        assert server.status == "running"
        assert json.loads((tmp_path / "journal.json").read_text()) == []
    finally:
        server.remove(force=True)
    run, _, requests = only_run(tmp_path / "results")
    (window,) = run["faults"]
    assert window["name"] == "backend-frozen"
    assert window["error"] is None
    # the pause took effect when dockerd answered: 0.1 s on a quiet machine (test_docker_faults), plus
    # the runner's timer waking late and a pause taking what one took from here in the same run
    late = 0.1 + noise.worst + cost
    assert abs(window["actual_start"] - window["planned_start"]) < late, (window, noise.worst, cost)
    frozen, base = summary(run, "en", "ttft", "backend-frozen"), summary(run, "en", "ttft", "baseline")
    # a request that starts u seconds into the pause waits PAUSE_S - u: half a pause at the median
    assert frozen["count"] >= 5, (frozen, base)
    assert frozen["p50"] > base["p50"] + 0.3 * PAUSE_S, (frozen, base)
    assert frozen["max"] > 0.8 * PAUSE_S, (frozen, base)
    assert base["p50"] < 0.3, (frozen, base)
    outcomes = {r["outcome"] for r in requests}
    assert outcomes <= {"ok", "cancelled"}, outcomes
