"""Locust's own transport, spoken without Locust, and the seal on every fault host message.

Locust's master and workers exchange ZeroMQ frames that each hold one msgpack array `(type, data,
node_id)` (locust/rpc/protocol.py); a worker's DEALER socket carries its node id as identity. A
fault host speaks exactly that with pyzmq and msgpack (both Locust's own dependencies) rather than
through `locust.rpc`: importing locust would monkey-patch the process with gevent and bring the load
generator onto the GPU host, and injectors do not know Locust.

Locust's transport has no authentication, and a fault host changes qdiscs and GPU clocks as root, so
every one of our messages is sealed: `data` is `{"body": JSON text, "mac": HMAC-SHA256(secret,
type NUL sender NUL body)}`, which binds the body to its type and to the node that sent it. Freshness
is the receiver's (faults/host/agent.py: the host's boot nonce and sequence numbers).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from typing import Any

import msgpack

SECRET_ENV = "LLMCHAOS_FAULT_SECRET"
MIN_SECRET = 16  # bytes: a shorter secret is refused
MAX_SECRET_READ = 4096  # bytes of a secret file read for its first line


class Refused(Exception):
    """A message that is not ours, not sealed with our secret, or malformed; the text is one line."""


def encode(kind: str, data: object, node_id: str) -> bytes:
    """One frame as Locust's `Message.serialize` writes it."""
    return msgpack.packb((kind, data, node_id))


def decode(frame: bytes) -> tuple[str, Any, str]:
    """(type, data, node_id) of a frame as Locust's `Message.unserialize` reads it."""
    try:
        kind, data, node_id = msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise Refused(f"not a Locust message: {e}") from None
    if not isinstance(kind, str) or not isinstance(node_id, (str, type(None))):
        raise Refused("not a Locust message: type and node id must be strings")
    return kind, data, node_id or ""


def _mac(secret: bytes, kind: str, sender: str, body: str) -> str:
    return hmac.new(secret, f"{kind}\0{sender}\0{body}".encode(), hashlib.sha256).hexdigest()


def seal(secret: bytes, kind: str, sender: str, body: dict[str, Any]) -> dict[str, str]:
    """`body` as a message's data, with its MAC."""
    text = json.dumps(body, separators=(",", ":"), sort_keys=True)
    return {"body": text, "mac": _mac(secret, kind, sender, text)}


def unseal(secret: bytes, kind: str, sender: str, data: object) -> dict[str, Any]:
    """The body of a sealed message, or Refused (no seal, a wrong MAC, a body that is not an object)."""
    if not isinstance(data, dict) or not isinstance(data.get("body"), str) or not isinstance(data.get("mac"), str):
        raise Refused("unauthenticated: no seal")
    if not hmac.compare_digest(_mac(secret, kind, sender, data["body"]), data["mac"]):
        raise Refused("unauthenticated: wrong MAC (another secret, or altered)")
    try:
        body = json.loads(data["body"])
    except ValueError:
        raise Refused("sealed, but its body is not JSON") from None
    if not isinstance(body, dict):
        raise Refused("sealed, but its body is not an object")
    return body


def read_secret(path: str | None, what: str) -> bytes:
    """The shared secret from a file (its first line) or else the environment (never the command
    line, where every user of the machine can read it); ValueError naming `what` otherwise."""
    if path:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without a writer, then is refused
        except OSError as e:
            raise ValueError(f"{what}: {path}: {e.strerror}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError(f"{what}: {path}: not a regular file")
            head = os.read(fd, MAX_SECRET_READ + 1)
            if len(head) > MAX_SECRET_READ and b"\n" not in head[:MAX_SECRET_READ]:
                raise ValueError(f"{what}: {path}: its first line is over {MAX_SECRET_READ} bytes")
            secret = head.split(b"\n", 1)[0].strip()
        except OSError as e:
            raise ValueError(f"{what}: {path}: {e.strerror}") from None
        finally:
            os.close(fd)
    else:
        secret = os.environ.get(SECRET_ENV, "").strip().encode()
        if not secret:
            raise ValueError(f"{what}: give a secret file, or the secret in {SECRET_ENV}")
    if len(secret) < MIN_SECRET:
        raise ValueError(f"{what}: the secret must be at least {MIN_SECRET} bytes")
    return secret
