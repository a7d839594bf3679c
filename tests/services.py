"""Real Prometheus and Pushgateway (Debian packages, `make debian-deps`) for tests.

Each runs on a free loopback port with its own temporary directory, and is stopped by its
own PID at exit. Nothing of the Debian defaults (/var/lib/prometheus, /etc/prometheus) is used.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.procs import free_port, stop

PROMETHEUS = "prometheus"
PUSHGATEWAY = "prometheus-pushgateway"


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found: run `make debian-deps` (as root) to install it")
    return path


@contextlib.contextmanager
def _run(args: list[str], url: str, tmp: Path, timeout: float) -> Iterator[subprocess.Popen]:
    """Start `args`, wait for `url`/-/ready to answer 200, yield the process, stop it by PID."""
    log_path = tmp / "process.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{args[0]} exited with {proc.returncode}:\n{log_path.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/-/ready", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{args[0]} not ready in {timeout}s:\n{log_path.read_text()}")
            time.sleep(0.05)
        yield proc
    finally:
        stop(proc)  # SIGINT (both shut down gracefully on it), then SIGKILL after 10 s


@contextlib.contextmanager
def pushgateway(timeout: float = 30.0) -> Iterator[str]:
    """A Pushgateway without persistence; yields its base URL, e.g. http://127.0.0.1:PORT."""
    tmp = Path(tempfile.mkdtemp(prefix="llmchaos-pushgateway-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Debian's default --persistence.file is /var/lib/prometheus/pushgateway.data: disable it.
    args = [_binary(PUSHGATEWAY), f"--web.listen-address=127.0.0.1:{port}", "--persistence.file=", "--log.level=warn"]
    try:
        with _run(args, url, tmp, timeout):
            yield url
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Instant query (/api/v1/query); returns data.result."""
        r = httpx.get(self.url + "/api/v1/query", params={"query": promql}, timeout=10)
        body = r.json()
        if r.status_code != 200 or body.get("status") != "success":
            raise RuntimeError(f"query {promql!r} failed ({r.status_code}): {body}")
        return body["data"]["result"]

    def wait_for(
        self,
        promql: str,
        predicate: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 20.0,
        interval: float = 0.25,
    ) -> list[dict[str, Any]]:
        """Poll `promql` until `predicate(result)` holds (scrape lag); returns that result."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql)
            if predicate(result):
                return result
            if time.monotonic() > deadline:
                targets = httpx.get(self.url + "/api/v1/targets", timeout=10).json()
                raise AssertionError(
                    f"{promql!r} not satisfied in {timeout}s; last result {result}; targets {targets}\n{self.log()}"
                )
            time.sleep(interval)


@contextlib.contextmanager
def prometheus(
    scrape_targets: list[str], scrape_interval: str = "1s", honor_labels: bool = True, timeout: float = 60.0
) -> Iterator[Prometheus]:
    """A Prometheus scraping each `host:port` in `scrape_targets` (job "llmchaos", /metrics)."""
    tmp = Path(tempfile.mkdtemp(prefix="llmchaos-prometheus-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": scrape_interval,
        },
        "scrape_configs": [
            {
                "job_name": "llmchaos",
                "metrics_path": "/metrics",
                "honor_labels": honor_labels,
                "static_configs": [{"targets": list(scrape_targets)}],
            }
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    (tmp / "consoles").mkdir()
    args = [
        _binary(PROMETHEUS),
        f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        # Debian defaults point at /etc/prometheus; keep everything in tmp.
        f"--web.console.templates={tmp / 'consoles'}",
        f"--web.console.libraries={tmp / 'consoles'}",
        "--log.level=warn",
    ]
    try:
        with _run(args, url, tmp, timeout) as proc:
            yield Prometheus(url, proc, tmp / "process.log")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
