"""`router`: one replica taken out of the reference server router's pool while it keeps running
(`PUT|DELETE /admin/router/pool/{i}`): a replica a load balancer drained, or lost sight of, whose
prefix cache goes cold for the turns routed elsewhere.

Target: `{sim: ROUTER_URL, replica: I}`, token_env optional. Params: none, or `{action: drop}`.

Restoring: the revert puts it back (`DELETE`) and counts once it reads back `in_pool: true`, or
not up (a replica that is down is out of the pool by its health check, no fault's doing); a router
that is gone holds no pool (TargetGone)."""

from __future__ import annotations

from typing import ClassVar

from faults.allow import Allowlist
from faults.injectors.admin import check_target, server_url
from faults.injectors.base import FieldError, InjectError, only_keys
from faults.injectors.replica import Router, index


class RouterDrop:
    kind: ClassVar[str] = "router"
    aimed: ClassVar[bool] = False

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"sim", "replica", "token_env"}, {"sim", "replica"})
        check_target(target)
        index(target)
        only_keys("params", params, {"action"})
        if params.get("action", "drop") != "drop":
            raise FieldError("params.action", f"must be drop (or left out), got {params['action']!r}")

    @classmethod
    def probe_host(cls) -> str | None:
        return None  # needs only a router started with --admin-token, which `probe` checks

    @classmethod
    def claim(cls, target: dict) -> tuple[str, str | None]:
        """What a window takes, for the schedule's overlap check: one replica's place in one pool."""
        return server_url(target), str(target["replica"])

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.target = target
        self.router = Router(target)
        self.path = f"/admin/router/pool/{target['replica']}"

    def probe(self, params: dict | None = None) -> str | None:
        return self.router.probe(self.target["replica"])

    def save(self, params: dict) -> dict:
        return self.read_back()  # for the journal's record: the revert puts it back whatever it read

    def apply(self, name: str, params: dict, saved: dict) -> None:
        self._expect(self.router.entry("PUT", self.path, {}), False, "after the drop")

    def confirm(self, params: dict) -> None:
        """Read the fault back once applied: InjectError unless the replica is out of the pool."""
        self._expect(self.read_back(), False, "once dropped")

    def revert(self, saved: dict) -> None:
        entry = self.router.entry("DELETE", self.path)
        if entry["state"] == "up":
            self._expect(entry, True, "after the revert")

    def read_back(self) -> dict:
        return self.router.entry("GET", f"/admin/replicas/{self.target['replica']}")

    def _expect(self, entry: dict, in_pool: bool, when: str) -> None:
        if entry["in_pool"] is not in_pool:
            raise InjectError(
                f"replica {self.target['replica']} reads back in_pool: {entry['in_pool']} "
                f"(state {entry['state']}) {when}"
            )
