"""Addresses and sockets: the loopback check the admin and control APIs share, kernel receive stamps."""

from __future__ import annotations

import ipaddress

SO_TIMESTAMPNS = 35  # Linux's socket option for nanosecond receive stamps; the socket module does not name it


def is_loopback(host: str) -> bool:
    """True only for an address known to be this host's loopback; a name or garbage is not."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
