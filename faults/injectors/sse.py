"""`sse`: a fault window on an SSE chaos proxy (`llmchaos proxy`), through its control API."""

from __future__ import annotations

from dataclasses import fields
from typing import ClassVar

import httpx

from faults.allow import Allowlist
from faults.injectors.base import FieldError, InjectError, only_keys
from faults.proxy.fault import FaultError, SSEFault
from faults.proxy.wire import CONTROL


class SSE:
    kind: ClassVar[str] = "sse"
    aimed: ClassVar[bool] = False

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"proxy"}, {"proxy"})
        only_keys("params", params, {f.name for f in fields(SSEFault)} - {"name"})
        try:
            SSEFault.from_json(params)
        except FaultError as e:
            raise FieldError(f"params.{e.field}", str(e)) from None

    @classmethod
    def probe_host(cls) -> str | None:
        return None  # needs only a running `llmchaos proxy`, which `probe` checks

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.url = f"http://{target['proxy']}{CONTROL}"
        self.http = httpx.Client(timeout=5)  # built once: building one costs tens of ms

    def _call(self, method: str, json: dict | None = None) -> dict:
        try:
            r = self.http.request(method, self.url, json=json)
        except httpx.TransportError as e:
            raise InjectError(f"proxy at {self.url} unreachable: {e}") from None
        if r.status_code != 200:
            raise InjectError(f"proxy refused ({r.status_code}): {r.text[:200]}")
        return r.json()

    def probe(self, params: dict | None = None) -> str | None:
        try:
            self._call("GET")
        except InjectError as e:
            return str(e)
        return None

    def save(self, params: dict) -> dict:
        return {}  # the proxy forwards untouched once its fault is cleared

    def apply(self, name: str, params: dict, saved: dict) -> None:
        self._call("PUT", json={**params, "name": name})

    def revert(self, saved: dict) -> None:
        try:
            self._call("DELETE")
        except InjectError:
            if self.probe() is None:  # reachable but refusing: a real failure
                raise  # an unreachable proxy holds no fault: already gone

    def read_back(self) -> dict:
        return self._call("GET")
