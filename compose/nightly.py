"""`make nightly`: the reference server, a fixed per-language load N times, then the regression gate
against a baseline folder. Every process is started by its command (`llmchaos serve`, `locust`,
`llmchaos regress`); settings come from the environment (the Makefile's NIGHTLY_* variables):

- NIGHTLY_DIR (results/nightly): this night's runs go to DIR/<stamp>/runs, its JUnit file and HTML
  report next to them; DIR/history keeps every night's runs (`regress --history`);
- NIGHTLY_BASELINE (DIR/baseline): the runs to gate against; when it holds none, tonight's become it;
- NIGHTLY_RUNS (3), NIGHTLY_DURATION (30s), NIGHTLY_WARMUP (5s), NIGHTLY_RATE (20 requests/s, open
  loop: a slower build is offered the same load; 0 for closed-loop users), NIGHTLY_USERS (32, the
  concurrency cap), NIGHTLY_LANGS (en,de,ja), NIGHTLY_MAX_TOKENS (32): the load, the same every night;
- NIGHTLY_SERVER_ARGS: extra `llmchaos serve` flags (the build under test, e.g. --sim-time-scale 1.2);
- NIGHTLY_RULES: a rules file for `llmchaos regress`;
- PUSHGATEWAY_URL: when set, every run pushes its metrics there (Locust's --push-gateway).

Exit status: the gate's (0 no regression, 1 a regression, 2 bad input).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from llmchaos.procs import free_port, stop

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR, BASELINE, HISTORY = "results/nightly", "baseline", "history"  # CI keeps DIR/baseline and DIR/history


def env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def serve(args: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llmchaos.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"nightly: the server exited with {proc.returncode}: see {log}")
        try:
            if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            stop(proc)
            raise SystemExit(f"nightly: the server did not get ready in 60 s: see {log}")
        time.sleep(0.1)


def load(url: str, results: Path, log: Path) -> None:
    argv = [
        *(sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "--only-summary"),
        *("--host", url, "--results-dir", str(results), "-t", env("NIGHTLY_DURATION", "30s")),
        *("-u", env("NIGHTLY_USERS", "32"), "-r", env("NIGHTLY_USERS", "32"), "--warmup", env("NIGHTLY_WARMUP", "5s")),
        *("--langs", env("NIGHTLY_LANGS", "en,de,ja"), "--max-tokens", env("NIGHTLY_MAX_TOKENS", "32")),
    ]
    rate = env("NIGHTLY_RATE", "20")
    if rate != "0":  # the load test checks the number itself
        argv += ["--rate", rate]
    if os.environ.get("PUSHGATEWAY_URL"):
        argv += ["--push-gateway", os.environ["PUSHGATEWAY_URL"]]
    with open(log, "ab") as out:
        code = subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code not in (0, 1):  # 1: failed requests, which the gate judges
        raise SystemExit(f"nightly: locust exited with {code}: see {log}")


def runs_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if (p / "run.json").is_file()) if folder.is_dir() else []


def main() -> int:
    top = Path(env("NIGHTLY_DIR", DEFAULT_DIR))
    baseline = Path(env("NIGHTLY_BASELINE", str(top / BASELINE)))
    tonight = top / time.strftime("%Y%m%dT%H%M%S")
    runs, history = tonight / "runs", top / HISTORY
    runs.mkdir(parents=True)
    server, url = serve(env("NIGHTLY_SERVER_ARGS", "").split(), tonight / "server.log")
    try:
        for i in range(int(env("NIGHTLY_RUNS", "3"))):
            print(f"nightly: run {i + 1} against {url}", flush=True)
            load(url, runs, tonight / "locust.log")
    finally:
        stop(server)
    history.mkdir(parents=True, exist_ok=True)
    for run in runs_in(runs):
        shutil.copytree(run, history / run.name)
    if not runs_in(baseline):
        shutil.copytree(runs, baseline, dirs_exist_ok=True)
        print(f"nightly: no baseline in {baseline}: tonight's {len(runs_in(runs))} runs are the baseline now")
        return 0
    argv = [sys.executable, "-m", "llmchaos.cli", "regress", "--baseline", str(baseline), "--current", str(runs)]
    argv += ["--junit", str(tonight / "junit.xml"), "--html", str(tonight / "report.html"), "--history", str(history)]
    if os.environ.get("NIGHTLY_RULES"):
        argv += ["--rules", os.environ["NIGHTLY_RULES"]]
    code = subprocess.run(argv, cwd=ROOT, check=False).returncode
    print(
        f"nightly: {'REGRESSION' if code == 1 else 'green' if code == 0 else 'error'}; report {tonight / 'report.html'}"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
