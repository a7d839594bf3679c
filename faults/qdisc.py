"""What `netem` and `tbf` share: one root qdisc on an interface, in a named network namespace or
the host, set with replace semantics and removed on revert, through pyroute2 (netlink)."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import ClassVar

from pyroute2 import IPRoute, NetNS, netns
from pyroute2.netlink.exceptions import NetlinkError

from faults.base import FieldError, InjectError, only_keys

ROOT = 0xFFFFFFFF  # TC_H_ROOT
HANDLE = 0x10000  # 1:


def default_route_interfaces() -> set[str]:
    """The host's interfaces with a default route: never a target (it would cut the host off)."""
    with IPRoute() as ipr:
        idx = {r.get_attr("RTA_OIF") for r in ipr.get_default_routes()}
        return {link.get_attr("IFLA_IFNAME") for link in ipr.get_links() if link["index"] in idx}


class RootQdisc:
    kind: ClassVar[str]
    qdisc: ClassVar[str]

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"netns", "interface"}, {"interface"})
        cls.options(params)

    @classmethod
    def options(cls, params: dict) -> dict:
        """pyroute2's keyword arguments for this qdisc, from the schedule's params (FieldError)."""
        raise NotImplementedError

    def __init__(self, target: dict) -> None:
        self.netns, self.interface = target.get("netns"), target["interface"]
        self.where = f"{self.interface} in netns {self.netns}" if self.netns else f"{self.interface} (host)"

    @contextlib.contextmanager
    def _ipr(self) -> Iterator[tuple[IPRoute, int]]:
        if os.geteuid() != 0:
            raise InjectError(f"{self.kind} on {self.where}: needs root (CAP_NET_ADMIN)")
        if self.netns and self.netns not in netns.listnetns():
            raise InjectError(f"{self.kind}: no network namespace {self.netns!r}")
        ipr = NetNS(self.netns) if self.netns else IPRoute()
        try:
            found = ipr.link_lookup(ifname=self.interface)
            if not found:
                raise InjectError(f"{self.kind}: no interface {self.where}")
            yield ipr, found[0]
        finally:
            ipr.close()

    def probe(self) -> str | None:
        if not self.netns and self.interface in default_route_interfaces():
            return f"{self.where} carries the host's default route; refused"
        try:
            with self._ipr():
                pass
        except InjectError as e:
            return str(e)
        return None

    def apply(self, name: str, params: dict) -> None:
        reason = self.probe()
        if reason:
            raise InjectError(reason)
        with self._ipr() as (ipr, index):
            try:
                ipr.tc("replace", self.qdisc, index, HANDLE, **self.options(params))
            except NetlinkError as e:
                if e.code == errno.ENOENT:
                    raise InjectError(f"this kernel has no sch_{self.qdisc} "
                                      f"(try: modprobe sch_{self.qdisc})") from None
                raise InjectError(f"{self.kind} on {self.where}: {e}") from None
            if self.read_back().get("kind") != self.qdisc:
                raise InjectError(f"{self.kind} on {self.where}: applied but not read back")

    def revert(self) -> None:
        with self._ipr() as (ipr, index):
            try:
                ipr.tc("del", index=index, parent=ROOT)
            except NetlinkError as e:
                if e.code not in (errno.ENOENT, errno.EINVAL):  # no root qdisc of ours: already gone
                    raise InjectError(f"{self.kind} revert on {self.where}: {e}") from None

    def read_back(self) -> dict:
        with self._ipr() as (ipr, index):
            roots = [q for q in ipr.get_qdiscs(index=index) if q["parent"] == ROOT]
            if not roots:
                return {"kind": None}
            return {"kind": roots[0].get_attr("TCA_KIND"), "handle": roots[0]["handle"]}


def number(params: dict, key: str, unit: str = "") -> float:
    """A non-negative number, or a string with a unit suffix stripped (`100ms`, `0.5%`)."""
    value = params[key]
    if isinstance(value, str) and unit and value.endswith(unit):
        value = value[: -len(unit)]
    try:
        v = float(value)
    except (TypeError, ValueError):
        expected = f"a number in {unit}" if unit else "a number"
        raise FieldError(f"params.{key}", f"expected {expected}, got {params[key]!r}") from None
    if v < 0:
        raise FieldError(f"params.{key}", "must not be negative")
    return v
