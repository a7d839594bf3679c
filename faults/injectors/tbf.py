"""`tbf`: a bandwidth limit (token bucket) on an interface. Params: rate (e.g. `8mbit`), burst
(bytes, default 32 KiB, from one full-size frame to 64 MiB), latency (default `50ms`, at most 10 s)."""

from __future__ import annotations

from typing import ClassVar

from pyroute2.netlink.rtnl.tcmsg.common import get_rate_parameters, tick_in_usec

from faults.injectors.base import U32, FieldError, millis, number, only_keys, rate
from faults.injectors.qdisc import RootQdisc

MIN_BURST = 1514  # bytes: an Ethernet frame with its header; the kernel refuses 0, drops what is larger


class Tbf(RootQdisc):
    kind = "tbf"
    qdisc = "tbf"
    probe_params: ClassVar[dict] = {"rate": "1mbit"}

    @classmethod
    def options(cls, params: dict) -> dict:
        only_keys("params", params, {"rate", "burst", "latency"}, {"rate"})
        burst = int(number(params, "burst", most=2**26)) if "burst" in params else 32768
        if burst < MIN_BURST:
            raise FieldError("params.burst", f"at least {MIN_BURST} bytes (a full-size frame), got {params['burst']!r}")
        latency = millis(params, "latency", most=10_000) if "latency" in params else 50.0
        opts = {"rate": rate(params, "rate"), "burst": burst, "latency": f"{round(latency * 1000)}us"}
        sizes = get_rate_parameters(opts)  # the 32-bit fields pyroute2 packs
        if sizes["buffer"] > U32:  # the time the burst takes, in the kernel's ticks
            longest = U32 / tick_in_usec / 1e6
            raise FieldError(
                "params.burst", f"{burst} bytes take over {longest:.3g} s at {params['rate']}: tbf holds no more"
            )
        if sizes["limit"] > U32:  # the queue: what the rate sends in the latency, and the burst
            raise FieldError(
                "params.latency", f"a queue of {sizes['limit']} bytes at {params['rate']}: tbf holds {U32}"
            )
        return opts
