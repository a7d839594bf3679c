"""`netem`: delay, jitter, correlation, loss, duplication, reordering and a rate limit on an
interface. Params: delay and jitter (`100ms`), distribution of the jitter (`uniform`, the kernel's
own, or iproute2's `normal`, `pareto`, `paretonormal` tables), correlation (of the delay), loss,
duplicate, reorder and each one's correlation (`0.5%`), rate (`8mbit`)."""

from __future__ import annotations

from typing import ClassVar

from faults.injectors.base import FieldError, number, only_keys, rate
from faults.injectors.qdisc import RootQdisc

MAX_DELAY_MS = 60_000
DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")
PERCENTS = {  # param: pyroute2's keyword, and the param it needs
    "correlation": ("delay_corr", "jitter"),
    "loss": ("loss", None),
    "loss_correlation": ("loss_corr", "loss"),
    "duplicate": ("duplicate", None),
    "duplicate_correlation": ("dup_corr", "duplicate"),
    "reorder": ("prob_reorder", "delay"),
    "reorder_correlation": ("corr_reorder", "reorder"),
}
PARAMS = {"delay", "jitter", "distribution", "rate", *PERCENTS}


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
        for key, (arg, needs) in PERCENTS.items():
            if key in params:
                pct = number(params, key, "%")
                if pct > 100:
                    raise FieldError(f"params.{key}", "a percentage, at most 100")
                if needs is not None and needs not in params:
                    raise FieldError(f"params.{key}", f"needs a {needs}")
                opts[arg] = pct
        if "rate" in params:
            opts["rate"] = rate(params, "rate")
        cls.distribution(params)
        return opts

    @staticmethod
    def distribution(params: dict) -> str:
        """The jitter's distribution: `uniform` (the default, no table) or the name of iproute2's table."""
        name = params.get("distribution", "uniform")
        if not isinstance(name, str) or name not in DISTRIBUTIONS:
            raise FieldError("params.distribution", f"expected one of {', '.join(DISTRIBUTIONS)}, got {name!r}")
        if "distribution" in params and "jitter" not in params:
            raise FieldError("params.distribution", "needs a jitter (it is the jitter's distribution)")
        return name
