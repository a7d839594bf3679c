"""The SSE proxy listening on every address of a network namespace this test creates, in front of
the reference server on that namespace's loopback, reached from a second namespace: the server's
loopback-only admin API and the proxy's control API stay out of a remote client's reach, however it
spells the path or whatever X-Forwarded-For it sends; a client on the loopback still reaches both."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.procs import ROOT, stop
from tests.system.netns import in_netns, veth_pair

TOKEN = "admin-secret"
ASK = """
import json, socket, sys, time
host, port, targets = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
deadline = time.monotonic() + 60
while True:  # until the proxy listens and its upstream answers
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b"GET /health HTTP/1.1\\r\\nhost: x\\r\\nconnection: close\\r\\n\\r\\n")
            if s.recv(65536).startswith(b"HTTP/1.1 200"):
                break
    except OSError:
        pass
    assert time.monotonic() < deadline, "the proxy never answered"
    time.sleep(0.1)
codes = []
for method, target, extra in targets:
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"{method} {target} HTTP/1.1\\r\\nhost: x\\r\\nauthorization: Bearer {sys.argv[4]}\\r\\n"
                  f"{extra}content-length: 0\\r\\nconnection: close\\r\\n\\r\\n".encode())
        codes.append(int(s.recv(65536).split(b" ")[1]))
print(json.dumps(codes))
"""
ADMIN = [
    ("GET", "/admin/device/clocks", ""),
    ("GET", "/admin/device/clocks", "x-forwarded-for: 127.0.0.1\r\n"),
    ("GET", "/admin/device/clocks", "forwarded: for=127.0.0.1\r\nx-real-ip: 127.0.0.1\r\n"),
    ("GET", "/%61dmin/device/clocks", ""),
    ("GET", "//admin/device/clocks", ""),
    ("GET", "/v1/../admin/device/clocks", ""),
    ("GET", "/ADMIN/device/clocks", ""),
    ("GET", "/admin", ""),
    ("PUT", "/_llmchaos/fault", ""),
]
PLAIN = [("GET", "/v1/models", "")]


def ask(ns: str, host: str, targets: list[tuple[str, str, str]]) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", ASK, host, "9100", json.dumps(targets), TOKEN],
        preexec_fn=in_netns(ns),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def behind_proxy() -> Iterator[tuple[str, str, str]]:
    """(the proxy's namespace, the client's namespace, the proxy's address)."""
    with veth_pair() as (a, b, addr_a, _addr_b):
        cli = [sys.executable, "-m", "llmchaos.cli"]
        server = subprocess.Popen(
            [*cli, "serve", "--host", "127.0.0.1", "--port", "8000", "--admin-token", TOKEN],
            cwd=ROOT,
            preexec_fn=in_netns(a),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            proxy = subprocess.Popen(
                [*cli, "proxy", "--listen", "0.0.0.0:9100", "--upstream", "http://127.0.0.1:8000"],
                cwd=ROOT,
                preexec_fn=in_netns(a),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                yield a, b, addr_a
            finally:
                stop(proxy)
        finally:
            stop(server)


def test_a_remote_client_cannot_reach_the_admin_or_control_api(behind_proxy):
    _, remote, addr = behind_proxy
    assert ask(remote, addr, ADMIN + PLAIN) == [403] * len(ADMIN) + [200]


def test_a_loopback_client_still_reaches_both(behind_proxy):
    local, _, _ = behind_proxy
    assert ask(local, "127.0.0.1", [ADMIN[0], ("GET", "/_llmchaos/fault", "")]) == [200, 200]
