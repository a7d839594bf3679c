"""Streaming HTTP client for the Locust users: the request runs on the data plane (`dataplane/`),
which times every SSE event and classifies the outcome; the calling greenlet waits for the record.

The greenlet keeps what Locust needs (users, spawning, events, stats); the bytes are read by one
native thread per process, so a read costs no greenlet switch and no timer: the native plane's (C,
where it is built) or the Python plane's (https, or LLMCHAOS_PLANE=python).
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from functools import cache
from urllib.parse import urlsplit

import gevent
from gevent.event import Event

from loadtests import dataplane
from loadtests.adapters import Adapter, Call
from loadtests.dataplane.connection import Connection
from loadtests.dataplane.loop import plane
from loadtests.dataplane.native import NativeLink
from loadtests.dataplane.request import Exchange
from loadtests.dataplane.response import Limits
from loadtests.record import RequestRecord

USER_AGENT = "llmchaos"
OWN_HEADERS = {"host", "content-length", "user-agent"}


@cache
def tls_context() -> ssl.SSLContext:
    """The system's trust store (SSL_CERT_FILE and SSL_CERT_DIR name others), verified as browsers do."""
    return ssl.create_default_context()


class StreamClient:
    """One connection (reused) to one target; one request at a time. Its host is resolved once,
    at the first request."""

    def __init__(self, base_url: str, limits: Limits) -> None:
        url = urlsplit(base_url)
        self.https = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.https else 80)
        self.netloc = url.netloc.rpartition("@")[2]
        self.prefix = url.path.rstrip("/")
        self.limits = limits
        self.plane = dataplane.choose(self.https)
        self._conn: Connection | NativeLink | None = None

    @property
    def connections(self) -> int:
        """Connections opened so far."""
        return self._conn.opened if self._conn is not None else 0

    def close(self) -> None:
        if isinstance(self._conn, NativeLink):
            self._conn.close()
        elif self._conn is not None:
            plane().call(self._conn.close)

    def run(self, adapter: Adapter, call: Call, stream: bool, rec: RequestRecord, start: float) -> None:
        """Send `call` and fill `rec`; `start` is the perf_counter time latencies and limits count from.
        The connection is kept only after a whole, successful response."""
        rec.sent = time.time()
        try:
            conn = self._connection()
        except OSError as e:
            rec.outcome, rec.error = "connect_error", f"{type(e).__name__}: {e}"
            rec.end_s = time.perf_counter() - start
            return
        if isinstance(conn, NativeLink):
            conn.run(adapter, self._request(call), stream, rec, start, self.limits)
            return
        done, woken = Event(), gevent.get_hub().loop.async_()  # the plane wakes this thread's hub
        woken.start(done.set)
        ex = Exchange(adapter, self._request(call), stream, rec, start, self.limits, woken.send)
        data_plane = plane()
        data_plane.call(lambda: conn.start(ex))
        os.sched_yield()  # the plane sends it now, not after whatever else this thread has to do
        try:
            done.wait()
        except BaseException as e:  # killed (the test stops) or timed out from outside: drop it
            data_plane.call(ex.cancel)
            while not done.is_set():  # the plane answers at once; only then is the record ours
                try:
                    done.wait()
                except gevent.GreenletExit:
                    continue
            if isinstance(e, gevent.GreenletExit):
                rec.outcome = "cancelled"
            raise
        finally:
            woken.close()

    def _connection(self) -> Connection | NativeLink:
        if self._conn is None:
            if not self.host:
                raise OSError(f"no host in the target URL {self.netloc!r}")
            family, _, _, _, sockaddr = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0]
            if self.plane == "native":
                self._conn = NativeLink((family, sockaddr))
            else:
                tls = tls_context() if self.https else None
                self._conn = Connection(plane(), self.host, (family, sockaddr), tls)
        return self._conn

    def _request(self, call: Call) -> bytes:
        head = [
            f"POST {self.prefix}{call.path} HTTP/1.1",
            f"host: {self.netloc}",
            f"content-length: {len(call.body)}",
            f"user-agent: {USER_AGENT}",
        ]
        for name, value in call.headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {name!r}: a line break in its value")
            if name.lower() not in OWN_HEADERS:
                head.append(f"{name}: {value}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + call.body
