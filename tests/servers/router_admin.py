"""The admin API of the reference server's router (`llmchaos serve --replicas N` or `--disaggregate
P:D`, with `--admin-token`), as /tmp/cluster's contract and docs/server.md give it, played on a free
loopback port by a thread of the test: replicas that are killed, paused, restarted and undone, a
pool, the prefix holder and the KV link. A restarted or started replica reads back `starting`, then
`up` from the next read on, unless its index is in `never_up`; `calls` holds (method, path, body)."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "s3cret"
MIN_PROMPT = 16  # characters: under one block, the holder is refused (400)
REPLICA = re.compile(r"/admin/(replicas|router/pool)/(\d+)")


class RouterAdmin:
    def __init__(self, replicas: int = 2, prefill: int = 0) -> None:
        self.pids = itertools.count(1000)
        self.replicas: list[dict] = [
            {
                "index": i,
                "role": ("prefill" if i < prefill else "decode") if prefill else "mixed",
                "state": "up",
                "in_pool": True,
                "pid": next(self.pids),
                "url": f"http://127.0.0.1:{9000 + i}",
            }
            for i in range(replicas)
        ]
        self.disaggregated = prefill > 0
        self.kv: dict = {"action": None, "delay_ms": None, "loss_pct": None}
        self.holders: dict[str, int] = {}  # a prompt's text -> the replica holding its prefix
        self.never_up: set[int] = set()
        self.ignore: set[str] = set()  # methods answered as if done, changing nothing
        self.calls: list[tuple[str, str, dict | None]] = []
        self.lock = threading.Lock()
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        admin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with admin.lock:
                    admin.calls.append((self.command, self.path, body))
                    if self.headers.get("authorization") != f"Bearer {TOKEN}":
                        status, answer = 401, {"error": {"message": "invalid admin token"}}
                    else:
                        status, answer = admin.answer(self.command, self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _answer

        return Handler

    def answer(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        """(status, JSON) for one call, as the router answers it."""
        if (method, path) == ("GET", "/admin/replicas"):
            return 200, {"replicas": [self._read(r) for r in self.replicas]}
        if (method, path) == ("POST", "/admin/router/holder"):
            prompt = (body or {}).get("prompt", "")
            if len(prompt) < MIN_PROMPT:
                return 400, {"error": {"message": "the prompt is under one KV block"}}
            return 200, {"replica": self.holders.get(prompt)}
        if path == "/admin/kv_link":
            return self._kv(method, body)
        m = REPLICA.fullmatch(path)
        if m is None or int(m.group(2)) >= len(self.replicas):
            return 404, {"error": {"message": f"no {path}"}}
        r = self.replicas[int(m.group(2))]
        if method in self.ignore:
            return 200, dict(r)
        if m.group(1) == "router/pool" and method in ("PUT", "DELETE"):
            r["in_pool"] = method == "DELETE" and r["state"] == "up"
        elif method == "PUT":
            action = (body or {}).get("action")
            if action not in ("kill", "pause", "restart"):
                return 400, {"error": {"message": f"unknown action {action!r}"}}
            after: dict[str, dict] = {"kill": {"state": "killed", "pid": None}, "pause": {"state": "paused"}}
            r |= after.get(action, {"state": "starting", "pid": next(self.pids)})
            r["in_pool"] = False
        elif method == "DELETE" and r["state"] == "paused":
            r |= {"state": "up", "in_pool": True}
        elif method == "DELETE" and r["state"] == "killed":
            r |= {"state": "starting", "pid": next(self.pids)}
        elif method != "GET":
            return 405, {"error": {"message": method}}
        else:
            return 200, self._read(r)
        return 200, dict(r)

    def _read(self, r: dict) -> dict:
        """A replica's entry as read now: one starting comes up at this read (its health check passed)."""
        if r["state"] == "starting" and r["index"] not in self.never_up:
            r |= {"state": "up", "in_pool": True}
        return dict(r)

    def _kv(self, method: str, body: dict | None) -> tuple[int, dict]:
        if not self.disaggregated:
            return 404, {"error": {"message": "not disaggregated"}}
        if method not in self.ignore:
            if method == "PUT":
                self.kv = {"action": None, "delay_ms": None, "loss_pct": None} | (body or {})
            elif method == "DELETE":
                self.kv = {"action": None, "delay_ms": None, "loss_pct": None}
        return 200, dict(self.kv)

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@contextlib.contextmanager
def serving(admin: RouterAdmin) -> Iterator[RouterAdmin]:
    """`admin` answering until the end of the `with`, then gone (its port refuses)."""
    thread = threading.Thread(target=admin.http.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield admin
    finally:
        admin.close()  # again, if the test took it away already: a no-op
        thread.join(5)
