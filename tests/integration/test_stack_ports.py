"""`stack up` never drives a program it did not start (issue 18, defect 9: a taken --server-port
exited 0, the readiness probe answered by the foreign server): a port asked for and taken is refused
before anything starts, one line and exit 2; a service is ready only when its own process listens."""

from __future__ import annotations

import contextlib
import io
import socket
import sys

from compose.state import Service, Stack, wait_ready
from llmchaos.cli import main
from llmchaos.procs import free_port


def foreign() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_taken_port_is_refused_before_anything_starts(tmp_path):
    with foreign() as other:
        port = other.getsockname()[1]
        for flag in ("--server-port", "--proxy-port"):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                status = main(["stack", "up", "--state-dir", str(tmp_path), flag, str(port)])
            assert status == 2
            assert err.getvalue().count("\n") == 1
            assert (
                f"{flag}: port {port} on 127.0.0.1 is taken (Address already in use): nothing started" in err.getvalue()
            )
    assert Stack.load(tmp_path).services == []


def test_a_service_is_its_own_process_listening_not_whoever_answers(tmp_path):
    with foreign() as other:
        port = other.getsockname()[1]
        stack = Stack(tmp_path)
        sleeper = Service("server-1", [sys.executable, "-c", "import time; time.sleep(60)"], f"http://127.0.0.1:{port}")
        stack.start(sleeper, tmp_path)
        try:
            assert not sleeper.listens()  # the port answers, but not from our process
        finally:
            stack.stop()
    mine = free_port("127.0.0.1")
    code = f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {mine})); s.listen(); time.sleep(60)"
    ours = Service("server-1", [sys.executable, "-c", code], f"http://127.0.0.1:{mine}")
    stack = Stack(tmp_path)
    stack.start(ours, tmp_path)
    try:
        assert wait_ready(ours, 60, Service.listens) is None  # once it has bound (a python start-up)
    finally:
        stack.stop()
