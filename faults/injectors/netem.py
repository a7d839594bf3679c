"""`netem`: delay, jitter, correlation, loss, duplication, reordering and a rate limit on an
interface. Params: delay and jitter (`100ms`), distribution of the jitter (`uniform`, the kernel's
own, or iproute2's `normal`, `pareto`, `paretonormal` tables), correlation (of the delay), loss,
duplicate, reorder and each one's correlation (`0.5%`), rate (`8mbit`)."""

from __future__ import annotations

import array
import functools
import os
import sysconfig
from pathlib import Path
from typing import ClassVar

from pyroute2 import IPRoute
from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST
from pyroute2.netlink.rtnl import RTM_NEWQDISC
from pyroute2.netlink.rtnl.tcmsg import sched_netem, tcmsg

from faults.injectors.base import FieldError, millis, number, only_keys, rate
from faults.injectors.qdisc import RootQdisc

MAX_DELAY_MS = 60_000
MAX_TABLE = 16384  # NETEM_DIST_MAX
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
            opts["delay"] = int(millis(params, "delay", most=MAX_DELAY_MS) * 1000)  # microseconds
        if "jitter" in params:
            if "delay" not in params:
                raise FieldError("params.jitter", "needs a delay")
            opts["jitter"] = int(millis(params, "jitter", most=MAX_DELAY_MS) * 1000)
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

    @classmethod
    def check_host(cls, params: dict) -> None:
        name = cls.distribution(params)
        if name != "uniform":
            table(name)

    def _add(self, ipr: IPRoute, command: str, index: int, handle: int, parent: int, params: dict) -> None:
        """The request pyroute2's netem plugin builds, sent as it is: through `ipr.tc` a `rate` would
        also land in the message's rate-estimator attribute (the kernel refuses it: ERANGE), and the
        plugin leaves the distribution table out (a TODO there), which this adds."""
        opts = sched_netem.get_parameters(self.options(params))
        name = self.distribution(params)
        if name != "uniform":
            opts["attrs"].append(["TCA_NETEM_DELAY_DIST", table(name)])
        msg = _NetemMessage()
        msg["index"], msg["handle"], msg["parent"] = index, handle, parent
        msg["attrs"] = [["TCA_KIND", "netem"], ["TCA_OPTIONS", opts]]
        msg["header"]["type"] = RTM_NEWQDISC
        how = NLM_F_REPLACE if command == "replace" else NLM_F_EXCL
        msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | how
        ipr.nlm_request_batch([msg])  # (its nlm_request fails in the sync API: a KeyError on nlm_generator)


class _NetemOptions(sched_netem.options):
    nla_map = tuple((n, "cdata" if n == "TCA_NETEM_DELAY_DIST" else t) for n, t in sched_netem.options.nla_map)


class _NetemMessage(tcmsg):
    @staticmethod
    def get_options(self: tcmsg, *argv: object, **kwarg: object) -> type:
        return _NetemOptions


# pyroute2 compiles an attribute table once per class and a subclass finds its parent's through the
# class attribute: compiled here, each subclass has its own (else the table went out empty: EINVAL).
for _cls in (_NetemOptions, _NetemMessage):
    _cls().compile_nla_table()


def table_dirs() -> list[Path]:
    """Where iproute2 keeps its distribution tables (tc's own TC_LIB_DIR first)."""
    multiarch = sysconfig.get_config_var("MULTIARCH")
    found = [os.environ.get("TC_LIB_DIR"), multiarch and f"/usr/lib/{multiarch}/tc", "/usr/lib/tc", "/usr/lib64/tc"]
    return [Path(d) for d in found if d]


@functools.cache
def table(name: str) -> bytes:
    """iproute2's `name`.dist as the kernel takes it: signed 16-bit values in host order (tc's reader:
    numbers separated by blanks, lines starting with '#' skipped)."""
    for d in table_dirs():
        path = d / f"{name}.dist"
        if path.is_file():
            values = [
                int(v, 0) for line in path.read_text().splitlines() if not line.startswith("#") for v in line.split()
            ]
            if not 0 < len(values) <= MAX_TABLE or not all(-32768 <= v < 32768 for v in values):
                raise FieldError("params.distribution", f"{path}: not a netem table")
            return array.array("h", values).tobytes()
    where = ", ".join(str(d) for d in table_dirs())
    raise FieldError("params.distribution", f"no {name}.dist in {where} (iproute2 installs it; or set TC_LIB_DIR)")
