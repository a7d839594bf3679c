"""Run real Locust (one process, or a master with workers) against a target and read its results."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from llmchaos import run
from llmchaos.histogram import HistogramSet
from tests.procs import ROOT, free_port

LOCUST = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "--only-summary"]


def _pin(cpu: int | None):
    return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))


def _cmd(file: str) -> list[str]:
    return [*LOCUST[:4], file, *LOCUST[5:]]


def locust(
    *args: str, cpu: int | None = None, timeout: float = 120.0, file: str = "loadtests/locustfile.py"
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_cmd(file), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, preexec_fn=_pin(cpu)
    )


def distributed(
    *args: str,
    workers: int = 2,
    cpu: int | None = None,
    master_cpu: int | None = None,
    timeout: float = 120.0,
    file: str = "loadtests/locustfile.py",
) -> subprocess.CompletedProcess:
    """A master and `workers` worker processes (workers pinned to `cpu`, the master to `master_cpu`);
    workers are stopped by PID if still alive."""
    port = free_port()
    procs = [
        subprocess.Popen(
            [*_cmd(file)[:-2], "--worker", "--master-port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_pin(cpu),
        )
        for _ in range(workers)
    ]
    try:
        return subprocess.run(
            [*_cmd(file), "--master", "--master-bind-port", str(port), "--expect-workers", str(workers), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_pin(master_cpu),
        )
    finally:
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def only_run(results_dir: Path) -> tuple[dict, HistogramSet, list[dict]]:
    """The one run under `results_dir`, read through the core's run model: run.json and the
    requests as their JSON, and the merged histograms."""
    (run_dir,) = [p for p in results_dir.iterdir() if p.is_dir()]
    loaded = run.load(run_dir)
    return loaded.run.to_json(), loaded.histograms, [dataclasses.asdict(r) for r in loaded.requests()]


def report(results_dir: Path) -> str:
    """What `llmchaos report` prints of the one run under `results_dir`."""
    (run_dir,) = [p for p in results_dir.iterdir() if p.is_dir()]
    cmd = [sys.executable, "-m", "llmchaos.cli", "report", str(run_dir)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout


def summary(run: dict, lang: str, metric: str, phase: str = "baseline") -> dict:
    rows = [r for r in run["summaries"] if (r["lang"], r["metric"], r["phase"]) == (lang, metric, phase)]
    assert len(rows) == 1, rows
    return rows[0]
