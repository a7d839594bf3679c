"""`netem`: delay, jitter, correlation, loss, duplication, reordering and a rate limit on an
interface. Params: delay and jitter (`100ms`), correlation, loss, duplicate, reorder (`0.5%`),
rate (`8mbit`)."""

from __future__ import annotations

from typing import ClassVar

from faults.injectors.base import FieldError, number, only_keys, rate
from faults.injectors.qdisc import RootQdisc

MAX_DELAY_MS = 60_000
PARAMS = {"delay", "jitter", "correlation", "loss", "duplicate", "reorder", "rate"}


class Netem(RootQdisc):
    kind = "netem"
    qdisc = "netem"
    probe_params: ClassVar[dict] = {"delay": "1ms"}

    @classmethod
    def options(cls, params: dict) -> dict:
        only_keys("params", params, PARAMS)
        if not params:
            raise FieldError("params", "give at least one of " + ", ".join(sorted(PARAMS)))
        opts: dict = {}
        if "delay" in params:
            opts["delay"] = int(number(params, "delay", "ms", most=MAX_DELAY_MS) * 1000)  # microseconds
        if "jitter" in params:
            if "delay" not in params:
                raise FieldError("params.jitter", "needs a delay")
            opts["jitter"] = int(number(params, "jitter", "ms", most=MAX_DELAY_MS) * 1000)
        for key, arg in (
            ("correlation", "delay_corr"),
            ("loss", "loss"),
            ("duplicate", "duplicate"),
            ("reorder", "prob_reorder"),
        ):
            if key in params:
                pct = number(params, key, "%")
                if pct > 100:
                    raise FieldError(f"params.{key}", "a percentage, at most 100")
                opts[arg] = pct
        if "rate" in params:
            opts["rate"] = rate(params, "rate")
        if "correlation" in params and not ("delay" in params and "jitter" in params):
            raise FieldError("params.correlation", "needs a delay and a jitter")
        return opts
