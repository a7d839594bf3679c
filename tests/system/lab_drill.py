"""Inside the kernel lab: the seed's jitter drill end to end. The reference server in namespace a, one
Locust process with a few users in namespace b, and a schedule whose one window puts netem (delay
100ms, jitter 30ms, uniform) on the server's side (a's veth0, egress: the answers and their SSE
chunks); every request is tagged with its phase, and the run's per-phase TTFT and ITL come back.

    python -m tests.system.lab_drill OUT.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from pyroute2 import netns

from llmchaos import run
from llmchaos.procs import stop
from tests.procs import ROOT
from tests.system.netns import in_netns, veth_pair

PORT = 8000
BASELINE_S, WINDOW_S, AFTER_S = 10, 10, 5
USERS = 4
DRILL = {"delay": "100ms", "jitter": "30ms", "distribution": "uniform"}


def ready(url: str, server: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the server was not ready")
        time.sleep(0.2)


def main(out_path: str) -> None:
    work = Path(out_path).parent
    with veth_pair() as (a, b, addr_a, _):
        netns.setns(b)  # this process is the client's side from here on; the server starts in a
        url = f"http://{addr_a}:{PORT}"
        log = open(work / "server.log", "w")  # noqa: SIM115 - closed at the end
        server = subprocess.Popen(
            [sys.executable, "-m", "llmchaos.cli", "serve", "--engine", "sim", "--host", addr_a, "--port", str(PORT)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=in_netns(a),
        )
        try:
            ready(url, server)
            schedule = work / "drill.yaml"
            fault = {"name": "jitter-drill", "kind": "netem", "target": {"netns": a, "interface": "veth0"}}
            fault |= {"at": f"{BASELINE_S}s", "duration": f"{WINDOW_S}s", "params": DRILL, "direction": "egress"}
            schedule.write_text(json.dumps({"seed": 7, "faults": [fault]}))
            duration = f"{BASELINE_S + WINDOW_S + AFTER_S}s"
            locust = subprocess.run(
                [
                    *[sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "--only-summary"],
                    *["--host", url, "-u", str(USERS), "-r", str(USERS), "-t", duration, "--langs", "en"],
                    *["--max-tokens", "32", "--schedule", str(schedule), "--fault-journal", str(work / "journal.json")],
                    *["--results-dir", str(work / "results")],
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            stop(server)
            log.close()
    if not (work / "results").is_dir():  # Locust wrote nothing: say why, with the server's end
        server_log = (work / "server.log").read_text()[-1500:]
        sys.exit(f"locust exited {locust.returncode}, no results:\n{locust.stderr[-3000:]}\n--server--\n{server_log}")
    (run_dir,) = [p for p in (work / "results").iterdir() if p.is_dir()]
    results = run.load(run_dir).run.to_json()
    Path(out_path).write_text(
        json.dumps(
            {
                "kernel": os.uname().release,
                "returncode": locust.returncode,
                "stderr": locust.stderr[-3000:],
                "faults": results["faults"],
                "summaries": [r for r in results["summaries"] if r["metric"] in ("ttft", "itl")],
                "journal": json.loads((work / "journal.json").read_text()),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
