"""The engines of a cluster as child processes: started, killed (SIGKILL), paused (SIGSTOP),
resumed and started again, each on its own loopback port. A child dies with the router (Linux's
parent-death signal), so no engine outlives a router killed by SIGKILL."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from llmchaos.procs import free_port

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(eq=False)
class Replica:
    index: int
    role: str  # mixed | prefill | decode
    argv: list[str]  # `llmchaos serve`'s options for it, but its address
    port: int = field(default_factory=free_port)
    kv_port: int | None = None  # a prefill engine's KV server
    proc: subprocess.Popen | None = None
    state: str = "starting"  # starting | up | down | killed | paused: what the supervisor did, and the health check saw
    healthy: bool = False  # routable as its health checks and requests found it (health.py)
    failed_checks: int = 0  # health checks failed in a row
    in_pool: bool = True  # the `router` fault takes it out while it runs on
    in_flight: int = 0  # requests the router has on it now
    ever_up: bool = False  # its health check has passed once: an exit after is a replica down, not a failed start

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def routable(self) -> bool:
        """What the router knows: its health (a killed one is routed to until a check or a request
        finds it dead), not the supervisor's state."""
        return self.healthy and self.in_pool

    def entry(self) -> dict:
        """What the admin API says of it."""
        pid = self.proc.pid if self.proc is not None and self.proc.poll() is None else None
        return {
            "index": self.index,
            "role": self.role,
            "state": self.state,
            "in_pool": self.in_pool,
            "healthy": self.healthy,
            "pid": pid,
            "url": self.url,
            "kv_port": self.kv_port,
            "in_flight": self.in_flight,
        }


class Supervisor:
    def __init__(self, replicas: list[Replica], lost: Callable[[Replica], None]) -> None:
        self.replicas = replicas
        self._lost = lost  # called when a replica's process (and its prefix cache) is gone
        self.failed: str | None = None  # why the cluster could not start: an engine exited before it was up

    def start(self, r: Replica) -> None:
        argv = [sys.executable, "-m", "llmchaos.cli", "serve", *r.argv, "--host", "127.0.0.1", "--port", str(r.port)]
        r.proc = subprocess.Popen(argv, preexec_fn=_die_with_parent)
        r.state = "starting"

    def start_all(self) -> None:
        for r in self.replicas:
            self.start(r)

    def kill(self, r: Replica) -> None:
        self._kill(r)
        r.state = "killed"

    def pause(self, r: Replica) -> None:
        if r.proc is not None and r.proc.poll() is None:
            r.proc.send_signal(signal.SIGSTOP)
            r.state = "paused"

    def restart(self, r: Replica) -> None:
        self._kill(r)
        self.start(r)

    def undo(self, r: Replica) -> None:
        """A paused one resumed, a killed or dead one started again; it is `starting` until its
        health check passes."""
        if r.state == "paused" and r.proc is not None and r.proc.poll() is None:
            r.proc.send_signal(signal.SIGCONT)
            r.state = "starting"
        elif r.state in ("killed", "down"):
            self.start(r)

    def exited(self, r: Replica) -> bool:
        """Whether its process is gone; one that died of itself is marked `down` (and lost)."""
        if r.proc is None or r.proc.poll() is None:
            return r.proc is None
        if r.state not in ("killed", "down"):
            if not r.ever_up:
                self.failed = f"engine {r.index} ({r.role}) exited with status {r.proc.returncode} before it was up"
            r.state = "down"
            self._lost(r)
        return True

    def stop_all(self, timeout_s: float) -> None:
        """SIGINT each (an engine drains on it; a paused one is resumed to), then SIGKILL after `timeout_s`."""
        live = [r for r in self.replicas if r.proc is not None and r.proc.poll() is None]
        for r in live:
            assert r.proc is not None
            r.proc.send_signal(signal.SIGCONT)
            r.proc.send_signal(signal.SIGINT)
        for r in live:
            assert r.proc is not None
            try:
                r.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()

    def _kill(self, r: Replica) -> None:
        if r.proc is not None and r.proc.poll() is None:
            r.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                r.proc.wait(5)
        self._lost(r)
