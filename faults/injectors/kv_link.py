"""`kv_link`: the prefill -> decode KV-cache link of the reference server's disaggregated cluster
(`llmchaos serve --disaggregate P:D --admin-token T`), slowed, lossy or cut in the prefill engines'
own KV servers, so it needs no root (`PUT|GET|DELETE /admin/kv_link`; the router fans it out to
every prefill engine). The kernel's netem and tbf with `match: {dport: KV_PORT}` act on the same
transfers' packets.

Target: `{sim: ROUTER_URL}` (or one prefill engine's URL), token_env optional. Params:
`{action: delay, delay: 200ms}` (each transfer held that long before its first byte), `{action:
loss, loss: 20%}` (that share of the sent chunks wait a 200 ms retransmission timeout), `{action:
partition}` (nothing sent, a link that blackholes: decode's --kv-failure decides what follows).

Restoring: the revert clears the link (`DELETE`) and counts only once it reads back `action: null`;
a server that is gone holds no fault (TargetGone)."""

from __future__ import annotations

from typing import ClassVar

from faults.allow import Allowlist
from faults.injectors.admin import AdminAPI, check_target, server_url
from faults.injectors.base import FieldError, InjectError, choice, millis, number, only_keys

PATH = "/admin/kv_link"
FIELDS = {"delay": "delay_ms", "loss": "loss_pct", "partition": None}  # the API's field of each action's param
MAX_DELAY_MS = 3_600_000.0  # an hour: past any engine's KV timeout


def amount(params: dict, action: str) -> float:
    """The param of a delay (ms) or a loss (%) action, checked."""
    return millis(params, action, MAX_DELAY_MS) if action == "delay" else number(params, action, "%", 100)


def body(params: dict) -> dict:
    """The admin API's body for these (checked) params."""
    action, api_field = params["action"], FIELDS[params["action"]]
    if api_field is None:
        return {"action": action}
    value = amount(params, action)
    return {"action": action, api_field: int(value) if value.is_integer() else value}


class KvLink:
    kind: ClassVar[str] = "kv_link"
    aimed: ClassVar[bool] = False

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"sim", "token_env"}, {"sim"})
        check_target(target)
        only_keys("params", params, {"action", "delay", "loss"}, {"action"})
        action = choice(params, "action", FIELDS)
        for key in ("delay", "loss"):
            if key in params and key != action:
                raise FieldError(f"params.{key}", f"goes with action: {key}, not {action}")
        if FIELDS[action] is not None:
            if action not in params:
                raise FieldError(f"params.{action}", f"missing (action: {action} needs it)")
            if amount(params, action) == 0:
                raise FieldError(f"params.{action}", "must be positive (0 is no fault)")

    @classmethod
    def probe_host(cls) -> str | None:
        return None  # needs only a disaggregated server started with --admin-token, which `probe` checks

    @classmethod
    def claim(cls, target: dict) -> tuple[str, str | None]:
        """What a window takes, for the schedule's overlap check: the link of one server, whatever
        its URL's trailing slash."""
        return server_url(target), ""

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.target = target
        self.admin = AdminAPI(target["sim"], target.get("token_env"), "KV link")

    def probe(self, params: dict | None = None) -> str | None:
        try:
            self.read_back()
        except InjectError as e:
            if "refused (404)" in str(e):
                return f"{e} (no KV link: llmchaos serve --disaggregate P:D --admin-token T)"
            return str(e)
        return None

    def save(self, params: dict) -> dict:
        return self.read_back()  # for the journal's record: the revert clears the link whatever it read

    def apply(self, name: str, params: dict, saved: dict) -> None:
        self._expect(self.admin.call("PUT", PATH, body(params)), body(params), "after setting it")

    def confirm(self, params: dict) -> None:
        """Read the fault back once applied: InjectError unless the link reports it."""
        self._expect(self.read_back(), body(params), "once applied")

    def revert(self, saved: dict) -> None:
        self.admin.call("DELETE", PATH)
        self._expect(self.read_back(), {"action": None}, "after the revert")

    def read_back(self) -> dict:
        state = self.admin.call("GET", PATH)
        action = state.get("action", "")
        if not (action is None or (isinstance(action, str) and action in FIELDS)):
            raise InjectError(f"KV link at {self.admin.url} answered {PATH} without action: null|delay|loss|partition")
        return state

    def _expect(self, state: dict, want: dict, when: str) -> None:
        if any(state.get(k) != v for k, v in want.items()):
            shown = ", ".join(f"{k}: {state.get(k)}" for k in want)
            raise InjectError(f"KV link at {self.admin.url} reads back {shown} {when}")
