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
import psutil

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


PORT_TRIES = 3  # a free port can be taken by another test's server before ours binds it (torch starts slowly)


@contextlib.contextmanager
def serve(*args: str, wait_ready: bool = True, timeout: float = 300.0) -> Iterator[Server]:
    """`llmchaos serve` on a free loopback port (another, if that one was taken before it bound it);
    stopped (then killed) by PID at exit."""
    for _ in range(PORT_TRIES):
        port = free_port()
        with _launched(port, args) as server:
            if _ready(server, port, wait_ready, timeout):
                yield server
                return
    raise RuntimeError(f"the server's port was taken before it bound it, {PORT_TRIES} times")


@contextlib.contextmanager
def _launched(port: int, args: tuple[str, ...]) -> Iterator[Server]:
    log = tempfile.NamedTemporaryFile(prefix="llmchaos-server-", suffix=".log", delete=False)  # noqa: SIM115 - closed and unlinked in the finally below
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    try:
        yield Server(f"http://127.0.0.1:{port}", proc, log.name)
    finally:
        stop(proc)
        log.close()
        os.unlink(log.name)


def _ready(server: Server, port: int, wait_ready: bool, timeout: float) -> bool:
    """Wait until `server` answers on `port` as itself: True; False when its port was taken first."""
    proc = server.proc
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            if "address already in use" in server.log().lower():
                return False
            raise RuntimeError(f"server exited with {proc.returncode}:\n{server.log()}")
        try:
            r = httpx.get(server.url + "/healthz", timeout=5)
            # ours, not another test's server that took the same free port while ours started
            if (r.status_code == 200 or not wait_ready) and listening(proc.pid, port):
                return True
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"server not ready in {timeout}s:\n{server.log()}")
        time.sleep(0.05)


def listening(pid: int, port: int) -> bool:
    """Whether process `pid` (or a child of it) listens on TCP `port`."""
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        return any(
            c.status == psutil.CONN_LISTEN and c.laddr.port == port for p in procs for c in p.net_connections("tcp")
        )
    except psutil.Error:
        return False


def wait_for(done: Callable[[], bool], proc: subprocess.Popen, what: str) -> None:
    """Poll `done()` every 20 ms until it holds, while `proc` runs: a run that ends by itself (`faults
    run` of a finite schedule), so no deadline is guessed for its start, which a busy machine stretches
    to seconds. If `proc` ends first, fail saying `what` did not happen, with its output."""
    while not done():
        if proc.poll() is not None:
            raise AssertionError(f"{what} before the run ended ({proc.returncode}): {proc.communicate(timeout=10)}")
        time.sleep(0.02)
