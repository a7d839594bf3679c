"""Child processes on loopback: a free port to give one, and stopping one by its own PID."""

from __future__ import annotations

import signal
import socket
import subprocess


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGINT (every process we start shuts down cleanly on it), then SIGKILL after `timeout`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
