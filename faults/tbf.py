"""`tbf`: a bandwidth limit (token bucket) on an interface. Params: rate (e.g. `8mbit`), burst
(bytes, default 32 KiB), latency (default `50ms`)."""

from __future__ import annotations

import re

from faults.base import FieldError, number, only_keys
from faults.qdisc import RootQdisc

RATE = re.compile(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)")


class Tbf(RootQdisc):
    kind = "tbf"
    qdisc = "tbf"
    probe_params = {"rate": "1mbit"}

    @classmethod
    def options(cls, params: dict) -> dict:
        only_keys("params", params, {"rate", "burst", "latency"}, {"rate"})
        if not isinstance(params["rate"], str) or not RATE.fullmatch(params["rate"]):
            raise FieldError("params.rate", f"expected e.g. 8mbit, got {params['rate']!r}")
        burst = int(number(params, "burst")) if "burst" in params else 32768
        latency = number(params, "latency", "ms") if "latency" in params else 50.0
        return {"rate": params["rate"], "burst": burst, "latency": f"{latency:g}ms"}
