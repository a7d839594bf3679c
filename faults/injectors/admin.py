"""The reference server's admin API (`llmchaos serve --admin-token`), as the injectors that drive it
call it: gpu_clock's simulated device (`/admin/device/clocks`) and corrupt (`/admin/faults/corrupt`).

A target names the server (`sim: URL`) and, optionally, the environment variable that holds the
admin token (`token_env`, default LLMCHAOS_ADMIN_TOKEN)."""

from __future__ import annotations

import logging
import os

import httpx

from faults.injectors.base import FieldError, InjectError, TargetGone, word

TOKEN_ENV = "LLMCHAOS_ADMIN_TOKEN"
TIMEOUT_S = 5.0


def check_target(target: dict) -> None:
    """The admin fields of a target: `sim` an http(s) URL (when given), `token_env` a variable's name."""
    if "sim" in target and not (isinstance(target["sim"], str) and target["sim"].startswith(("http://", "https://"))):
        raise FieldError("target.sim", f"must be the server's http(s) URL, got {target['sim']!r}")
    if "token_env" in target:
        word(target, "token_env", "an environment variable's name")


def server_url(target: dict) -> str:
    """The server's base URL as a target names it, whatever its trailing slash."""
    return str(target["sim"]).rstrip("/")


def quiet() -> None:
    """httpx logs every request at INFO: every admin API call (a revert polls) is not news in a log."""
    logging.getLogger("httpx").setLevel(logging.WARNING)


class AdminAPI:
    """One server's admin API; `what` names it in errors ("simulated device", "reference server")."""

    def __init__(self, url: str, token_env: str | None = None, what: str = "reference server") -> None:
        self.url, self.what = url.rstrip("/"), what
        token = os.environ.get(token_env or TOKEN_ENV, "")
        # built once: building a client costs tens of ms
        self.http = httpx.Client(timeout=TIMEOUT_S, headers={"authorization": f"Bearer {token}"})

    def call(self, method: str, path: str, json: dict | None = None, empty_ok: bool = False) -> dict:
        """The answer's JSON object ({} for an empty body where `empty_ok`: vLLM answers so). TargetGone
        when nothing listens (a server that is gone holds no fault), InjectError for any other transport
        error, a status other than 200 or an answer that is not a JSON object."""
        try:
            r = self.http.request(method, self.url + path, json=json)
        except httpx.ConnectError as e:
            raise TargetGone(f"{self.what} at {self.url} is gone ({e})") from None
        except httpx.TransportError as e:
            raise InjectError(f"{self.what} at {self.url} unreachable: {e}") from None
        if r.status_code != 200:
            raise InjectError(f"{self.what} refused ({r.status_code}): {r.text[:200]}")
        if empty_ok and not r.content.strip():
            return {}
        try:
            answer = r.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise InjectError(f"{self.what} at {self.url} answered {path} with something other than a JSON object")
        return answer
