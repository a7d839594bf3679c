"""`tbf`: a bandwidth limit (token bucket) on an interface. Params: rate (e.g. `8mbit`), burst
(bytes, default 32 KiB, at most 64 MiB), latency (default `50ms`, at most 10 s)."""

from __future__ import annotations

from typing import ClassVar

from faults.injectors.base import number, only_keys, rate
from faults.injectors.qdisc import RootQdisc


class Tbf(RootQdisc):
    kind = "tbf"
    qdisc = "tbf"
    probe_params: ClassVar[dict] = {"rate": "1mbit"}

    @classmethod
    def options(cls, params: dict) -> dict:
        only_keys("params", params, {"rate", "burst", "latency"}, {"rate"})
        burst = int(number(params, "burst", most=2**26)) if "burst" in params else 32768
        latency = number(params, "latency", "ms", most=10_000) if "latency" in params else 50.0
        return {"rate": rate(params, "rate"), "burst": burst, "latency": f"{latency:g}ms"}
