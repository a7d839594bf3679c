"""`docker`: pause, kill, stop, restart, CPU-throttle or disconnect containers through the Docker SDK.

Targets: `{container: NAME}` or `{label: "key=value"}`, optionally `host` (the daemon's URL;
default: DOCKER_HOST, else the local socket). Only running containers that carry an allowed label
(default `llmchaos.allow=true`) are hit.

Params, by action: `{action: pause}` (`cluster: partition`: what `llmchaos k8s render` makes of it,
here nothing), `{action: kill, signal: SIGKILL}`, `{action: stop, timeout: 10s}`,
`{action: restart, timeout: 10s}`, `{action: cpu, cpus: 0.2}`, `{action: disconnect, network: NAME}`.
Revert unpauses, starts again what was running, restores the CPU quota and reconnects the network.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal, TypeVar, overload

from faults.allow import Allowlist
from faults.injectors.base import FieldError, InjectError, TargetGone, number, only_keys

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

T = TypeVar("T")

OPTIONAL = {
    "pause": {"cluster"},
    "kill": {"signal"},
    "stop": {"timeout"},
    "restart": {"timeout"},
    "cpu": set(),
    "disconnect": set(),
}
REQUIRED = {"cpu": {"cpus"}, "disconnect": {"network"}}
PERIOD_US = 100_000  # the CFS period a CPU throttle uses


def _signal(value: object) -> str:
    """A signal's name from `KILL`, `SIGKILL` or `9`."""
    if isinstance(value, int) and not isinstance(value, bool) and value in signal.Signals._value2member_map_:
        return signal.Signals(value).name
    name = value.upper() if isinstance(value, str) else ""
    name = name if name.startswith("SIG") else "SIG" + name
    if name not in signal.Signals.__members__:
        raise FieldError("params.signal", f"unknown signal {value!r}")
    return name


def connect(host: str | None) -> DockerClient:
    """The daemon at `host`, else DOCKER_HOST, else the local socket, once it answered a ping
    (imported late: it is slow)."""
    import docker

    try:
        client = docker.DockerClient(base_url=host, timeout=30) if host else docker.from_env(timeout=30)
        client.ping()
    except Exception as e:  # noqa: BLE001 - docker and requests raise many kinds; all mean unreachable
        raise InjectError(
            f"no Docker daemon at {host or 'DOCKER_HOST or the local socket'}: {str(e).splitlines()[0]}"
        ) from None
    return client


class Docker:
    kind: ClassVar[str] = "docker"
    aimed: ClassVar[bool] = False

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"container", "label", "host"})
        if ("container" in target) == ("label" in target):
            raise FieldError("target", "give exactly one of container (a name) or label (key=value)")
        for key, value in target.items():
            if not isinstance(value, str) or not value:
                raise FieldError(f"target.{key}", "must be a non-empty string")
        action = params.get("action")
        if not isinstance(action, str) or action not in OPTIONAL:
            raise FieldError("params.action", f"expected one of {', '.join(OPTIONAL)}, got {action!r}")
        required = {"action"} | REQUIRED.get(action, set())
        only_keys("params", params, required | OPTIONAL[action], required)
        if "signal" in params:
            _signal(params["signal"])
        if "timeout" in params:
            number(params, "timeout", "s", most=3600)
        if "cluster" in params and params["cluster"] != "partition":
            raise FieldError("params.cluster", f"expected partition (a pause on a cluster), got {params['cluster']!r}")
        if "cpus" in params and number(params, "cpus", most=1024) == 0:
            raise FieldError("params.cpus", "must be positive (a fraction of one CPU, or more)")
        if "network" in params and not isinstance(params["network"], str):
            raise FieldError("params.network", "must be a network name")

    @classmethod
    def probe_host(cls) -> str | None:
        try:
            connect(None).close()
        except InjectError as e:
            return str(e)
        return None

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.target, self.allow = target, allow
        self._docker: DockerClient | None = None
        self._seen: dict[str, Container] = {}  # the containers `save` just inspected, so `apply` need not again

    def _client(self) -> DockerClient:
        if self._docker is None:
            self._docker = connect(self.target.get("host"))
        return self._docker

    @overload
    def _call(
        self, what: str, fn: Callable[..., T], *args: object, gone_ok: Literal[False] = False, **kw: object
    ) -> T: ...

    @overload
    def _call(self, what: str, fn: Callable[..., T], *args: object, gone_ok: bool, **kw: object) -> T | None: ...

    def _call(self, what: str, fn: Callable[..., T], *args: object, gone_ok: bool = False, **kw: object) -> T | None:
        """One Docker call, its errors as one line; with `gone_ok`, a missing container gives None."""
        from docker.errors import DockerException, NotFound
        from requests import RequestException

        try:
            return fn(*args, **kw)
        except NotFound:
            if gone_ok:
                return None
            raise InjectError(f"docker {what}: not found") from None
        except (DockerException, RequestException) as e:
            raise InjectError(f"docker {what}: {str(e).splitlines()[0]}") from None

    def _matching(self, allowed_only: bool = True) -> list[Container]:
        client = self._client()
        if "container" in self.target:
            one = self._call("inspect", client.containers.get, self.target["container"], gone_ok=True)
            found = [] if one is None else [one]
        else:
            found = self._call("list", client.containers.list, all=True, filters={"label": self.target["label"]})
        if not found:
            what = self.target.get("container") or f"with label {self.target['label']}"
            raise InjectError(f"no container {what}")
        for c in found if allowed_only else ():
            refused = self.allow.container(c.name, c.labels)
            if refused:
                raise InjectError(refused)
        return found

    def probe(self, params: dict | None = None) -> str | None:
        try:
            self._matching()
        except InjectError as e:
            return str(e)
        return None

    def save(self, params: dict) -> dict:
        """The running containers this window hits, with their CPU quota and network endpoint."""
        hit = []
        # Keyed by the full ID: `c.id` reads attrs["Id"] too, but the SDK types it as optional.
        self._seen = {c.attrs["Id"]: c for c in self._matching() if c.status == "running"}
        for cid, c in self._seen.items():
            host = c.attrs["HostConfig"]
            entry = {
                "id": cid,
                "name": c.name,
                "cpu_quota": host.get("CpuQuota") or 0,
                "cpu_period": host.get("CpuPeriod") or 0,
            }
            if params["action"] == "disconnect":
                endpoint = c.attrs["NetworkSettings"]["Networks"].get(params["network"])
                if endpoint is None:
                    raise InjectError(f"container {c.name} is not on network {params['network']!r}")
                entry["aliases"] = [a for a in endpoint.get("Aliases") or [] if not cid.startswith(a)]
                entry["ipv4"] = (endpoint.get("IPAMConfig") or {}).get("IPv4Address")
            hit.append(entry)
        if not hit:
            raise InjectError(f"no running container matches {self.target}")
        return {"action": params["action"], "network": params.get("network"), "containers": hit}

    def apply(self, name: str, params: dict, saved: dict) -> None:
        client = self._client()
        action = params["action"]
        for entry in saved["containers"]:
            c = self._seen.pop(entry["id"], None) or self._call("inspect", client.containers.get, entry["id"])
            if action == "pause" and c.status == "running":
                self._call("pause", c.pause)
            elif action == "kill" and c.status == "running":
                self._call("kill", c.kill, signal=_signal(params.get("signal", "SIGKILL")))
            elif action in ("stop", "restart"):
                fn = c.stop if action == "stop" else c.restart
                self._call(action, fn, timeout=int(number(params, "timeout", "s")) if "timeout" in params else 10)
            elif action == "cpu":
                self._call(
                    "update",
                    c.update,
                    cpu_period=PERIOD_US,
                    cpu_quota=max(1000, int(number(params, "cpus") * PERIOD_US)),
                )
            elif action == "disconnect" and saved["network"] in c.attrs["NetworkSettings"]["Networks"]:
                network = self._call("network", client.networks.get, saved["network"])
                self._call("disconnect", network.disconnect, c)

    def revert(self, saved: dict) -> None:
        client = self._client()
        gone = []
        for entry in saved.get("containers", []):
            c = self._call(f"inspect {entry['name']}", client.containers.get, entry["id"], gone_ok=True)
            if c is None:
                gone.append(entry["name"])  # removed meanwhile: nothing left to undo
                continue
            restart = saved["action"] in ("kill", "stop", "restart")
            if c.status == "paused":
                self._call("unpause", c.unpause)
            elif restart and c.status in ("exited", "created", "dead"):
                self._call("start", c.start)
            if saved["action"] == "cpu":
                quota = entry["cpu_quota"]
                self._call(
                    "update",
                    c.update,
                    cpu_quota=quota if quota > 0 else -1,
                    **({"cpu_period": entry["cpu_period"]} if quota > 0 and entry["cpu_period"] else {}),
                )
            if saved["action"] == "disconnect" and saved["network"] not in c.attrs["NetworkSettings"]["Networks"]:
                network = self._call("network", client.networks.get, saved["network"])
                self._call(
                    "connect", network.connect, c, aliases=entry.get("aliases") or None, ipv4_address=entry.get("ipv4")
                )
        if gone and len(gone) == len(saved.get("containers", [])):
            raise TargetGone(f"no container {', '.join(gone)} any more")

    def read_back(self) -> dict:
        out = []
        for c in self._matching(allowed_only=False):
            host = c.attrs["HostConfig"]
            quota, period = host.get("CpuQuota") or 0, host.get("CpuPeriod") or PERIOD_US
            out.append(
                {
                    "name": c.name,
                    "status": c.status,
                    "cpus": quota / period if quota > 0 else None,
                    "networks": sorted(c.attrs["NetworkSettings"]["Networks"]),
                }
            )
        return {"containers": out}
