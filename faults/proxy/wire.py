"""HTTP/1.1 pieces the proxy writes: a request as it goes upstream, its own JSON answers, chunks."""

from __future__ import annotations

import http
import json
from dataclasses import dataclass, field
from urllib.parse import unquote

CONTROL = "/_llmchaos/fault"  # the proxy's own control API (loopback only)
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"content-length",
        b"host",
        b"te",
        b"trailer",
        b"upgrade",
        b"expect",  # the proxy has the whole body already
        b"proxy-authorization",
        b"proxy-authenticate",
        b"accept-encoding",  # events are split as plain text
    }
)
# Who the client is, as others claim it: never passed on, the proxy says it itself.
FORWARDING = frozenset({b"forwarded", b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto", b"x-real-ip"})
END = b"0\r\n\r\n"
MAX_HEAD = 64 * 1024  # bytes of a request's or an answer's head
HEAD_TIMEOUT_S = 10.0  # seconds from a head's first byte to its end (a request's: --header-timeout)
MAX_BODY = 64 * 1024 * 1024  # bytes of a request's body


class HeadTooLarge(Exception):
    def __init__(self) -> None:
        super().__init__(f"head over {MAX_HEAD} bytes")


def grown(size: int, more: int) -> int:
    """A message head's size after `more` bytes of it; HeadTooLarge past MAX_HEAD."""
    if (size := size + more) > MAX_HEAD:
        raise HeadTooLarge
    return size


@dataclass
class Request:
    """One request as the client sent it."""

    url: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)
    method: bytes = b""
    keep_alive: bool = True
    http11: bool = True

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k.lower() == name), None)

    def upstream_bytes(self, base: bytes, authority: bytes, peer: str) -> bytes:
        """The request as it goes upstream: hop-by-hop headers (and those `connection` names) dropped,
        a length for the body, and the client's own address in x-forwarded-for."""
        named = {t.strip().lower() for t in (self.header(b"connection") or b"").split(b",")}
        keep = b"".join(
            b"%s: %s\r\n" % (k, v)
            for k, v in self.headers
            if (n := k.lower()) not in HOP_BY_HOP and n not in FORWARDING and n not in named
        )
        return b"%s %s%s HTTP/1.1\r\nhost: %s\r\ncontent-length: %d\r\nx-forwarded-for: %s\r\n%s\r\n%s" % (
            self.method,
            base,
            self.url,
            authority,
            len(self.body),
            peer.encode(),
            keep,
            self.body,
        )


def path(url: bytes) -> str:
    return url.split(b"?", 1)[0].decode("latin-1")


def is_admin(target: str) -> bool:
    """Whether a path reaches a server's admin API (`/admin/...`) however it is spelled: escaped
    (even twice), with dot segments, repeated or back slashes, `;` parameters, any letter case."""
    while (unescaped := unquote(target)) != target:
        target = unescaped
    segments: list[str] = []
    for segment in target.replace("\\", "/").lower().split("/"):
        segment = segment.split(";", 1)[0]
        if segment == "..":
            segments = segments[:-1]
        elif segment not in ("", "."):
            segments.append(segment)
    return segments[:1] == ["admin"]


def response(status: int, body: dict, headers: dict[str, str] | None = None, close: bool = False) -> bytes:
    """One of the proxy's own answers, as JSON."""
    payload = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()) + ("connection: close\r\n" if close else "")
    return (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n{head}\r\n"
    ).encode() + payload


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)
