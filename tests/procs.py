"""Start real processes for tests and remove them by their own PID."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

from llmchaos.procs import free_port, stop

__all__ = ["ROOT", "Server", "free_port", "serve", "stop", "wait_for"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log_path: str

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def scrape(self) -> str:
        """/metrics as text. Not httpx's default 5 s read timeout: a torch server computing on a CPU that a
        timing test runs ahead of (make test) took longer to answer; a scrape waits for a busy server."""
        return httpx.get(self.url + "/metrics", timeout=60).text

    def metrics(self) -> dict[str, float]:
        """Unlabelled-by-value view of /metrics: 'name{labels}' -> value."""
        out: dict[str, float] = {}
        for line in self.scrape().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def metric(self, name: str) -> float:
        """Sum of every series of `name` (all label values)."""
        return sum(v for k, v in self.metrics().items() if k == name or k.startswith(name + "{"))


@contextlib.contextmanager
def serve(*args: str, wait_ready: bool = True, timeout: float = 300.0) -> Iterator[Server]:
    """`llmchaos serve` on a free loopback port; stopped (then killed) by PID at exit."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llmchaos-server-", suffix=".log", delete=False)  # noqa: SIM115 - closed and unlinked in the finally below
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    server = Server(f"http://127.0.0.1:{port}", proc, log.name)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}:\n{server.log()}")
            try:
                r = httpx.get(server.url + "/healthz", timeout=5)
                if r.status_code == 200 or not wait_ready:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not ready in {timeout}s:\n{server.log()}")
            time.sleep(0.05)
        yield server
    finally:
        stop(proc)
        log.close()
        os.unlink(log.name)


def wait_for(done: Callable[[], bool], proc: subprocess.Popen, what: str) -> None:
    """Poll `done()` every 20 ms until it holds, while `proc` runs: a run that ends by itself (`faults
    run` of a finite schedule), so no deadline is guessed for its start, which a busy machine stretches
    to seconds. If `proc` ends first, fail saying `what` did not happen, with its output."""
    while not done():
        if proc.poll() is not None:
            raise AssertionError(f"{what} before the run ended ({proc.returncode}): {proc.communicate(timeout=10)}")
        time.sleep(0.02)
