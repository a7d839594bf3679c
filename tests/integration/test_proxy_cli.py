"""`llmchaos proxy` on the command line: a bad --listen or --upstream is one line and exit status 2,
and a bracketed IPv6 address listens where it says."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
import pytest

from tests.procs import ROOT, free_port, stop


def proxy_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "llmchaos.cli", "proxy", *args]


@pytest.mark.parametrize(
    ("listen", "upstream", "message"),
    [
        ("127.0.0.1:99999", "http://127.0.0.1:8000", "--listen: port must be within 1..65535, got 99999"),
        ("127.0.0.1:0", "http://127.0.0.1:8000", "--listen: port must be within 1..65535, got 0"),
        ("::1:9100", "http://127.0.0.1:8000", "--listen: an IPv6 address goes in brackets"),
        ("127.0.0.1", "http://127.0.0.1:8000", "--listen: expected HOST:PORT"),
        ("127.0.0.1:9100", "http://127.0.0.1:70000", "--upstream: port must be within 1..65535"),
        ("127.0.0.1:9100", "http://:8000", "--upstream: no host in"),
        ("127.0.0.1:9100", "ftp://127.0.0.1:8000", "--upstream: expected an http(s) URL"),
    ],
)
def test_a_bad_address_is_one_line_and_exit_2(listen, upstream, message):
    r = subprocess.run(
        proxy_command("--listen", listen, "--upstream", upstream), cwd=ROOT, capture_output=True, text=True, timeout=20
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert message in r.stderr


def test_a_port_in_use_is_one_line_and_exit_2():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        r = subprocess.run(
            proxy_command("--listen", f"127.0.0.1:{port}", "--upstream", "http://127.0.0.1:8000"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=20,
        )
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert f"--listen: cannot listen on 127.0.0.1:{port}" in r.stderr


def first_answer(proc: subprocess.Popen, call: Callable[[], httpx.Response]) -> httpx.Response:
    """`call`'s answer once the proxy started by `proc` listens (within 20 s)."""
    deadline = time.monotonic() + 20
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the proxy did not answer"
        with contextlib.suppress(httpx.TransportError):
            return call()
        time.sleep(0.05)


def test_a_bracketed_ipv6_address_listens_there():
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        proxy_command("--listen", f"[::1]:{port}", "--upstream", "http://127.0.0.1:8000"),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        r = first_answer(proc, lambda: httpx.get(f"http://[::1]:{port}/_llmchaos/fault"))
        assert r.json() == {"active": False, "fault": None}
    finally:
        stop(proc)


def test_the_control_listener_answers_the_control_api_alone():
    """`--control-listen`: the fault set there is the proxy's (a cluster's Task steps set it so); any
    other path there is a 404, never forwarded."""
    data, control = free_port(), free_port()
    listen = ["--listen", f"127.0.0.1:{data}", "--control-listen", f"127.0.0.1:{control}"]
    proc = subprocess.Popen(
        proxy_command(*listen, "--upstream", "http://127.0.0.1:8000"),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        fault = {"name": "drop", "drop_ratio": 0.15}
        r = first_answer(proc, lambda: httpx.put(f"http://127.0.0.1:{control}/_llmchaos/fault", json=fault))
        assert r.status_code == 200
        assert httpx.get(f"http://127.0.0.1:{data}/_llmchaos/fault").json()["fault"]["drop_ratio"] == 0.15
        other = httpx.post(f"http://127.0.0.1:{control}/v1/chat/completions", json={})
        assert other.status_code == 404
        assert httpx.delete(f"http://127.0.0.1:{control}/_llmchaos/fault").json()["active"] is False
    finally:
        stop(proc)


def test_a_bad_control_address_is_one_line_and_exit_2():
    r = subprocess.run(
        proxy_command("--listen", "127.0.0.1:9100", "--control-listen", "9199", "--upstream", "http://127.0.0.1:8000"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 2, r.stderr
    assert "--control-listen: expected HOST:PORT" in r.stderr
