"""`replica`: kill, pause or restart one engine behind the reference server's router
(`llmchaos serve --replicas N` or `--disaggregate P:D`, with `--admin-token`), through its admin API
(`PUT|DELETE /admin/replicas/{i}`).

Target: `{sim: ROUTER_URL, replica: I}`, or `{sim: ROUTER_URL, holding: TEXT}`: the replica whose
prefix cache the router believes holds TEXT's leading KV blocks (`POST /admin/router/holder`),
resolved once per window when it is saved and journalled, so the revert acts on that replica
whatever the router believes later; token_env optional. Params: `{action: kill|pause|restart}`:
SIGKILL, staying dead for the window; SIGSTOP; SIGKILL and start again at once.

Restoring: the revert undoes (`DELETE`: SIGCONT a paused one, start a killed one; a restarted one
has nothing to undo) and counts only once the replica reads back `up` (its health check passed);
a router that is gone took its replicas with it (TargetGone)."""

from __future__ import annotations

import time
from typing import ClassVar

from faults.allow import Allowlist
from faults.injectors.admin import AdminAPI, check_target, server_url
from faults.injectors.base import FieldError, InjectError, choice, only_keys

ACTIONS = {"kill": "killed", "pause": "paused", "restart": "starting"}  # the state each leaves it in
MAX_REPLICAS = 1024
UP_WAIT_S = 60.0  # a revert waits this long for the replica's health check to pass (an engine's start)
POLL_S = 0.1


def index(target: dict) -> int:
    """target.replica, checked: a replica's index."""
    i = target["replica"]
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < MAX_REPLICAS:
        raise FieldError("target.replica", f"must be a replica's index, 0 to {MAX_REPLICAS - 1}, got {i!r}")
    return i


class Router:
    """The router's admin API as the cluster kinds (replica, router) read it: its replicas' entries."""

    def __init__(self, target: dict) -> None:
        self.admin = AdminAPI(target["sim"], target.get("token_env"), "router")

    def replicas(self) -> dict:
        """`GET /admin/replicas`, with a hint when the server is no router."""
        try:
            answer = self.admin.call("GET", "/admin/replicas")
        except InjectError as e:
            if "refused (404)" in str(e):
                raise InjectError(f"{e} (not a router: llmchaos serve --replicas N --admin-token T)") from None
            raise
        if not isinstance(answer.get("replicas"), list):
            raise InjectError(f"router at {self.admin.url} answered /admin/replicas without a list of replicas")
        return answer

    def entry(self, method: str, path: str, json: dict | None = None) -> dict:
        """One replica's entry, as `GET /admin/replicas/{i}` and the calls that change it answer it."""
        entry = self.admin.call(method, path, json)
        if not isinstance(entry.get("state"), str) or not isinstance(entry.get("in_pool"), bool):
            raise InjectError(f"router at {self.admin.url} answered {path} without a replica's state and in_pool")
        return entry

    def probe(self, i: int | None) -> str | None:
        """None when the router answers and has replica `i` (any, for None), else why not."""
        try:
            replicas = [r.get("index") for r in self.replicas()["replicas"] if isinstance(r, dict)]
        except InjectError as e:
            return str(e)
        if i is not None and i not in replicas:
            return f"the router at {self.admin.url} has no replica {i} (it has {', '.join(map(str, replicas))})"
        return None


class Replica:
    kind: ClassVar[str] = "replica"
    aimed: ClassVar[bool] = False

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"sim", "replica", "holding", "token_env"}, {"sim"})
        check_target(target)
        if ("replica" in target) == ("holding" in target):
            raise FieldError("target", "give exactly one of replica (an index) or holding (a prompt's text)")
        if "replica" in target:
            index(target)
        elif not isinstance(target["holding"], str) or not target["holding"].strip():
            raise FieldError("target.holding", "must be the text of a prompt whose prefix a replica holds")
        only_keys("params", params, {"action"}, {"action"})
        choice(params, "action", ACTIONS)

    @classmethod
    def probe_host(cls) -> str | None:
        return None  # needs only a router started with --admin-token, which `probe` checks

    @classmethod
    def claim(cls, target: dict) -> tuple[str, str | None]:
        """What a window takes, for the schedule's overlap check: one replica of one router; a
        `holding` window may resolve to any of them."""
        return server_url(target), str(target["replica"]) if "replica" in target else None

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.target = target
        self.router = Router(target)
        self.applied: tuple[int, str, object] | None = None  # (replica, action, pid before) of the last apply

    def probe(self, params: dict | None = None) -> str | None:
        if "replica" in self.target:
            return self.router.probe(self.target["replica"])
        return self.router.probe(None) or self._holder(probing=True)[1]

    def _holder(self, probing: bool = False) -> tuple[int | None, str | None]:
        """(the replica holding target.holding, why none); a refusal (a text under one block) is an
        InjectError, or with `probing` the reason."""
        try:
            answer = self.router.admin.call("POST", "/admin/router/holder", {"prompt": self.target["holding"]})
        except InjectError as e:
            if probing:
                return None, f"target.holding: {e}"
            raise
        i = answer.get("replica")
        if i is None:
            return None, None
        if not isinstance(i, int) or isinstance(i, bool):
            raise InjectError(f"router at {self.router.admin.url} answered /admin/router/holder with replica {i!r}")
        return i, None

    def save(self, params: dict) -> dict:
        """The replica this window acts on (resolved from target.holding now) and its entry; refused
        unless it is up, so one fault never undoes another's."""
        if "replica" in self.target:
            i = self.target["replica"]
        else:
            i, _ = self._holder()
            if i is None:
                raise InjectError(
                    f"no replica holds the prefix of target.holding at {self.router.admin.url} "
                    "(the router has routed no prompt that begins so, or its replica lost it)"
                )
        entry = self.router.entry("GET", f"/admin/replicas/{i}")
        if entry["state"] != "up":
            raise InjectError(f"replica {i} is {entry['state']}, not up: another fault holds it")
        return {"replica": i, "state": entry["state"], "pid": entry.get("pid")}

    def apply(self, name: str, params: dict, saved: dict) -> None:
        i, action = saved["replica"], params["action"]
        self.applied = (i, action, saved.get("pid"))
        self._expect(self.router.entry("PUT", f"/admin/replicas/{i}", {"action": action}), "after the PUT")

    def confirm(self, params: dict) -> None:
        """Read the fault back once applied: InjectError unless the replica reads back so."""
        assert self.applied is not None, "confirm follows an apply"
        self._expect(self.router.entry("GET", f"/admin/replicas/{self.applied[0]}"), "once applied")

    def _expect(self, entry: dict, when: str) -> None:
        assert self.applied is not None
        i, action, pid = self.applied
        if action == "restart":  # a new process, up or starting
            ok, want = entry["state"] in ("starting", "up") and (pid is None or entry.get("pid") != pid), "restarted"
        else:
            ok, want = entry["state"] == ACTIONS[action], ACTIONS[action]
        if not ok:
            raise InjectError(f"replica {i} reads back {entry['state']} (pid {entry.get('pid')}) {when}, not {want}")

    def revert(self, saved: dict) -> None:
        i = saved["replica"]
        path = f"/admin/replicas/{i}"
        entry = self.router.entry("GET", path)
        if entry["state"] not in ("up", "starting"):
            entry = self.router.entry("DELETE", path)
        deadline = time.monotonic() + UP_WAIT_S
        while entry["state"] != "up":
            if time.monotonic() > deadline:
                raise InjectError(f"replica {i} reads back {entry['state']} {UP_WAIT_S:g} s after the revert, not up")
            time.sleep(POLL_S)
            entry = self.router.entry("GET", path)

    def read_back(self) -> dict:
        return self.router.replicas()
