"""A pyroute2 netlink socket in a named network namespace, made there by this thread (setns in, the
socket, setns back) rather than by pyroute2's NetNS, which forks the whole process for it: seconds for
a Locust process in a busy kernel, and a window starts that much late."""

from __future__ import annotations

import os
import socket

from pyroute2 import IPRoute, netns

NETLINK_ROUTE = 0


def socket_in(name: str | None) -> IPRoute:
    """An IPRoute on rtnetlink in namespace `name` (None: this thread's own); FileNotFoundError when
    there is no such namespace (none is made)."""
    if name is None:
        return IPRoute()
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        netns.setns(name, flags=0)  # (without O_CREAT: a namespace that is gone is not made again)
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE)
        finally:
            netns.setns(own)
    finally:
        os.close(own)
    return IPRoute(fileno=sock.detach())
