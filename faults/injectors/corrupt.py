"""`corrupt`: the reference server answers 200 with garbage, a model that has lost its GPU, through
its admin API (`PUT|DELETE /admin/faults/corrupt`; reference_server/corrupt.py says what it shows).

Target: `{sim: "http://127.0.0.1:8000", token_env: LLMCHAOS_ADMIN_TOKEN}` (as gpu_clock's sim target;
token_env optional). Params: none (`{}`).

Restoring: the revert clears the fault and counts only once the server reads back `corrupt: false`;
a server that is gone holds no fault (TargetGone)."""

from __future__ import annotations

from typing import ClassVar

from faults.allow import Allowlist
from faults.injectors.admin import AdminAPI, check_target
from faults.injectors.base import InjectError, only_keys

PATH = "/admin/faults/corrupt"


class Corrupt:
    kind: ClassVar[str] = "corrupt"
    aimed: ClassVar[bool] = False

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"sim", "token_env"}, {"sim"})
        check_target(target)
        only_keys("params", params, set())

    @classmethod
    def probe_host(cls) -> str | None:
        return None  # needs only a reference server started with --admin-token, which `probe` checks

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.target = target
        self.admin = AdminAPI(target["sim"], target.get("token_env"))

    def probe(self, params: dict | None = None) -> str | None:
        try:
            self.read_back()
        except InjectError as e:
            return str(e)
        return None

    def save(self, params: dict) -> dict:
        return self.read_back()  # for the journal's record: the revert clears the fault whatever it read

    def apply(self, name: str, params: dict, saved: dict) -> None:
        self._expect(self.admin.call("PUT", PATH), True, "after setting it")

    def revert(self, saved: dict) -> None:
        self.admin.call("DELETE", PATH)
        self._expect(self.read_back(), False, "after the revert")

    def read_back(self) -> dict:
        state = self.admin.call("GET", PATH)
        if not isinstance(state.get("corrupt"), bool):
            raise InjectError(f"reference server at {self.admin.url} answered {PATH} without corrupt: true|false")
        return state

    def confirm(self, params: dict) -> None:
        """Read the fault back once applied: InjectError unless the server reports it set."""
        self._expect(self.read_back(), True, "once applied")

    def _expect(self, state: dict, on: bool, when: str) -> None:
        if state.get("corrupt") is not on:
            raise InjectError(f"reference server at {self.admin.url} reads back corrupt: {state.get('corrupt')} {when}")
