"""`netem` and `tbf` windows as a NetworkChaos step on the server's pods (--selector), in the device
the target names (`interface`, e.g. eth0 inside the pods)."""

from __future__ import annotations

import math
from decimal import Decimal

from faults.injectors.base import BITS, RATE, FieldError, millis, number
from faults.k8s.cluster import Cluster, Piece, Step, go_duration
from faults.schedule import FaultSpec

INT32 = 2**31 - 1
NETEM_ACTIONS = ("delay", "loss", "duplicate")  # one of these alone is its own action, more are `netem`


def check(spec: FaultSpec, cluster: Cluster) -> None:
    if "netns" in spec.target:
        raise FieldError(
            "target.netns", "a host's network namespace has no meaning on a cluster: the pods are --selector's"
        )
    cluster.server_pods(spec.kind)
    peers(spec.applied_params)
    if spec.kind == "netem" and "reorder" in spec.params and "delay" not in spec.params:
        raise FieldError("params.reorder", "Chaos Mesh reorders within a delay: give one")
    if spec.kind == "tbf":
        bandwidth(spec.params)
    else:
        netem(spec.params)


def peers(params: dict) -> dict:
    """Which traffic of the selected pods a window shapes, in NetworkChaos's words. Chaos Mesh shapes a
    pod's packets on their way out, picks its pods by --selector and its peers by address: `egress`
    (the default) is `direction: to`, and `match.dst` its `externalTargets`. What it cannot say is
    refused: packets on their way in (it would shape the peers' pods, which a schedule does not name),
    a source other than the pods themselves, ports."""
    direction, match = params.get("direction") or "egress", params.get("match") or {}
    if direction != "egress":
        raise FieldError(
            "direction",
            f"{direction}: Chaos Mesh shapes packets on their way out of the --selector pods; "
            "shape the peers' egress instead (a window of their own)",
        )
    for key in ("src", "sport", "dport"):
        if key in match:
            raise FieldError(f"match.{key}", "NetworkChaos names peers by address (match.dst), not by port or source")
    out: dict = {"direction": "to"}
    if "dst" in match:
        dst = match["dst"]
        out["externalTargets"] = [str(d) for d in (dst if isinstance(dst, list) else [dst])]
    return out


def piece(step: Step, cluster: Cluster) -> Piece:
    w = step.window
    action = {"action": "bandwidth", "bandwidth": bandwidth(w.params)} if w.kind == "tbf" else netem(w.params)
    chaos = {
        "action": action.pop("action"),
        "mode": "all",
        "selector": cluster.server_pods(w.kind),
        "device": w.target["interface"],
        **peers(w.params),
        **action,
    }
    return Piece(
        {
            "name": step.name,
            "templateType": "NetworkChaos",
            "deadline": go_duration(w.end - w.start),
            "networkChaos": chaos,
        }
    )


def _time(params: dict, key: str) -> str:
    """A delay in milliseconds as netem applies it (whole microseconds), in Chaos Mesh's notation."""
    us = round(millis(params, key) * 1000)
    return f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def _pct(params: dict, key: str) -> str:
    return f"{number(params, key, '%'):g}"


def netem(params: dict) -> dict:
    """NetworkChaos's action and fields for the netem params (checked by the netem injector)."""
    if params.get("distribution", "uniform") != "uniform":
        raise FieldError("params.distribution", "Chaos Mesh's delay is uniform within the jitter: it loads no tables")
    out: dict = {}
    if "delay" in params:
        delay: dict = {"latency": _time(params, "delay")}
        if "jitter" in params:
            delay["jitter"] = _time(params, "jitter")
        if "correlation" in params:
            delay["correlation"] = _pct(params, "correlation")
        out["delay"] = delay
        if "reorder" in params:  # gap 1: what tc and pyroute2 take when none is given
            delay["reorder"] = {"reorder": _pct(params, "reorder"), "gap": 1}
            if "reorder_correlation" in params:
                delay["reorder"]["correlation"] = _pct(params, "reorder_correlation")
    for key in ("loss", "duplicate"):
        if key in params:
            out[key] = {key: _pct(params, key)}
            if f"{key}_correlation" in params:
                out[key]["correlation"] = _pct(params, f"{key}_correlation")
    if "rate" in params:
        out["rate"] = {"rate": whole_rate(params, "rate")}
    actions = [a for a in NETEM_ACTIONS if a in out]
    return {"action": actions[0] if len(actions) == 1 and "rate" not in out else "netem", **out}


def bandwidth(params: dict) -> dict:
    """tbf's rate, burst and latency as NetworkChaos's bandwidth: the queue (`limit`, bytes) is what
    tc makes of a latency, rate x latency + burst."""
    m = RATE.fullmatch(params["rate"])
    assert m is not None, "the tbf injector checked the rate"
    burst = int(number(params, "burst")) if "burst" in params else 32768
    latency_ms = millis(params, "latency") if "latency" in params else 50.0
    limit = math.ceil(float(m.group(1)) * BITS[m.group(2)] / 8 * latency_ms / 1000) + burst
    if limit > INT32:
        raise FieldError("params", f"the queue this rate and latency need ({limit} bytes) is over Chaos Mesh's {INT32}")
    return {"rate": whole_rate(params, "rate"), "limit": limit, "buffer": burst}


def whole_rate(params: dict, key: str) -> str:
    """A tc rate as Chaos Mesh takes it, an integer before the unit (1.5mbit is 1500kbit): its
    webhook parses an unsigned integer. Its daemon, like tc, then sets bits / 8 bytes a second."""
    m = RATE.fullmatch(params[key])
    assert m is not None, "the injector checked the rate"
    bits = Decimal(m.group(1)) * BITS[m.group(2)]
    if bits % 1:
        raise FieldError(f"params.{key}", f"{params[key]}: Chaos Mesh takes a whole number of bits a second")
    unit = next(u for u in ("gbit", "mbit", "kbit", "bit") if bits % BITS[u] == 0)
    return f"{int(bits / BITS[unit])}{unit}"
