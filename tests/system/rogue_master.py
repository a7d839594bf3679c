"""A master that should not be obeyed, for the fault host's refusal test: it binds Locust's port,
waits for the fault host's hello, then sends it leases sealed with another secret, unsealed, for
another run of it, a valid empty one, that one again (a replay), one sealed with the right secret
whose window's `expires_in` is a word, and one for targets outside the host's allowlist. Writes the
ack each got (null: none) as JSON.

    python -m tests.system.rogue_master SECRET_FILE OUT.json   (in the master's namespace)
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

import zmq

from faults.host import messages as m
from faults.host.seal import decode, encode, read_secret, seal, unseal

PORT = 5557
TBF = {"rate": "1mbit", "burst": 4096, "latency": "50ms"}


def main(secret_file: str, out: str) -> None:
    secret = read_secret(secret_file, "rogue")
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind(f"tcp://0.0.0.0:{PORT}")
    identity, hello = _hello(sock, secret)
    session, acks = uuid.uuid4().hex, {}

    def lease(seq: int, windows: list[m.Desired], to: str = hello.boot) -> dict[str, Any]:
        return m.body(m.Lease(to, session, seq, time.time(), windows))

    def send(name: str, data: object) -> bytes:
        frame = encode(m.LEASE, data, identity)
        sock.send_multipart([identity.encode(), frame])
        acks[name] = _ack(sock, secret, identity)
        return frame

    link = m.Desired("link#0", "link", "tbf", {"interface": "g2c"}, TBF, 5.0)
    send("wrong-secret", seal(b"another secret, 24 bytes", m.LEASE, identity, lease(1, [link])))
    send("no-seal", lease(1, [link]))
    send("wrong-boot", seal(secret, m.LEASE, identity, lease(1, [link], to="0" * 16)))
    valid = send("valid", seal(secret, m.LEASE, identity, lease(1, [])))
    sock.send_multipart([identity.encode(), valid])  # the same frame again
    acks["replay"] = _ack(sock, secret, identity)
    mistyped = {**m.body(link), "expires_in": "soon"}
    send("mistyped", seal(secret, m.LEASE, identity, {**lease(2, []), "windows": [mistyped]}))
    outside = [
        m.Desired("other-link#0", "other-link", "tbf", {"interface": "g2m"}, TBF, 5.0),
        m.Desired(
            "other-server#0", "other-server", "gpu_clock", {"sim": "http://127.0.0.1:9"}, {"graphics_mhz": 660}, 5.0
        ),
    ]
    send("outside", seal(secret, m.LEASE, identity, lease(3, outside)))
    send("after", seal(secret, m.LEASE, identity, lease(4, [])))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(acks, f)


def _hello(sock: zmq.Socket, secret: bytes) -> tuple[str, m.Hello]:
    while True:
        _, frame = sock.recv_multipart()
        kind, data, node = decode(frame)
        if kind == m.HELLO:
            return node, m.parse(m.Hello, unseal(secret, kind, node, data))


def _ack(sock: zmq.Socket, secret: bytes, identity: str, wait_s: float = 1.5) -> dict[str, Any] | None:
    """The next ack within `wait_s` (hellos skipped), or None."""
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        if not sock.poll(int(left * 1000)):
            break
        _, frame = sock.recv_multipart()
        kind, data, _ = decode(frame)
        if kind == m.ACK:
            return unseal(secret, kind, identity, data)
    return None


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
