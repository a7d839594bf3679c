"""`cache_flush`: the server forgets its prefix cache at the window's start, as a restart would lose
it, through vLLM's own admin route (`POST /reset_prefix_cache`, served by vLLM under
VLLM_SERVER_DEV_MODE=1 and by the reference server with --admin-token, a router to every replica).
The window is what comes after: the next turns of every conversation pay for their whole prompt
again, until the cache has refilled.

Target: `{sim: "http://127.0.0.1:8000", token_env: LLMCHAOS_ADMIN_TOKEN}` (as corrupt's; token_env
optional). Params: none (`{}`).

Confirming: the reference server counts its resets (GET), so the flush counts once the count has
grown; vLLM only answers the POST (200, with `{"success": true}` or an empty body; 409 or
`success: false` when it could not). `reset_running_requests=true` asks vLLM to reset under load
too, as the reference server always does. Restoring: nothing to undo, the cache refills itself."""

from __future__ import annotations

from typing import ClassVar

from faults.allow import Allowlist
from faults.injectors.admin import AdminAPI, check_target
from faults.injectors.base import InjectError, only_keys

PATH = "/reset_prefix_cache"
RESET = PATH + "?reset_running_requests=true"


class CacheFlush:
    kind: ClassVar[str] = "cache_flush"
    aimed: ClassVar[bool] = False

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"sim", "token_env"}, {"sim"})
        check_target(target)
        only_keys("params", params, set())

    @classmethod
    def probe_host(cls) -> str | None:
        return None  # needs only a server that serves the route, which `probe` checks

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.target = target
        self.admin = AdminAPI(target["sim"], target.get("token_env"), "server")

    def probe(self, params: dict | None = None) -> str | None:
        try:
            self.read_back()
        except InjectError as e:
            if "(405)" in str(e):
                return None  # vLLM's route takes only POST: it is there
            if "(404)" in str(e):
                return (
                    f"server at {self.admin.url} has no {PATH}: start vLLM with VLLM_SERVER_DEV_MODE=1, "
                    "the reference server with --admin-token"
                )
            return str(e)
        return None

    def save(self, params: dict) -> dict:
        return {"resets": self._resets()}  # the count the flush must pass; None where the server keeps none

    def apply(self, name: str, params: dict, saved: dict) -> None:
        """Flush, then, where the server counts its resets, InjectError unless the count has passed
        `save`'s (another client's reset in between counts too: the cache is cold either way)."""
        answer = self.admin.call("POST", RESET, empty_ok=True)
        if answer.get("success") is False:
            raise InjectError(f"server at {self.admin.url} could not reset its prefix cache (success: false)")
        before = saved.get("resets")
        if before is not None and not (self._resets() or 0) > before:
            raise InjectError(f"server at {self.admin.url} still reads back {before} resets after the flush")

    def revert(self, saved: dict) -> None:
        return None  # a flushed cache refills as prompts come: nothing is left to undo

    def read_back(self) -> dict:
        return self.admin.call("GET", PATH)

    def _resets(self) -> int | None:
        try:
            resets = self.read_back().get("resets")
        except InjectError as e:
            if "(405)" in str(e):
                return None
            raise
        return resets if isinstance(resets, int) and not isinstance(resets, bool) else None
