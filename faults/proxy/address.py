"""Where the proxy listens and where it forwards to, read from the command line (UsageError naming
the flag otherwise)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from llmchaos.errors import UsageError

PORTS = "1..65535"


@dataclass(frozen=True)
class Target:
    """The upstream: where to connect, and the base path and Host header its requests get."""

    host: str
    port: int
    tls: bool
    base: bytes
    authority: bytes


def _port(text: str, flag: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise UsageError(f"expected HOST:PORT, got port {text!r}", field=flag)
    port = int(text)
    if not 1 <= port <= 65535:
        raise UsageError(f"port must be within {PORTS}, got {port}", field=flag)
    return port


def listen_address(text: str, flag: str = "--listen") -> tuple[str, int]:
    """(host, port) from `HOST:PORT`, `[IPv6]:PORT` or `:PORT` (loopback)."""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise UsageError(f"expected [IPv6 ADDRESS]:PORT, got {text!r}", field=flag)
        return host, _port(rest[1:], flag)
    host, colon, port = text.rpartition(":")
    if not colon:
        raise UsageError(f"expected HOST:PORT, got {text!r}", field=flag)
    if ":" in host:
        raise UsageError(f"an IPv6 address goes in brackets, as in [::1]:9100; got {text!r}", field=flag)
    return host or "127.0.0.1", _port(port, flag)


def upstream_target(url: str) -> Target:
    """The upstream from its base URL (`http(s)://HOST[:PORT][/BASE]`)."""
    if any(c.isspace() or not c.isprintable() for c in url):  # urlsplit drops a newline or tab unsaid
        raise UsageError(f"a URL has no spaces or control characters, got {url!r}", field="--upstream")
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise UsageError(f"expected an http(s) URL, got {url!r}", field="--upstream")
    try:
        port = u.port
    except ValueError:
        port = 0
    if port == 0 or not u.hostname:
        raise UsageError(
            f"port must be within {PORTS}, got {url!r}" if u.hostname else f"no host in {url!r}", field="--upstream"
        )
    tls = u.scheme == "https"
    return Target(
        u.hostname,
        port or (443 if tls else 80),
        tls,
        u.path.rstrip("/").encode(),
        u.netloc.rpartition("@")[2].encode(),
    )
