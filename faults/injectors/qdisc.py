"""What `netem` and `tbf` share: a qdisc fault on an interface, in a named network namespace or the
host, through pyroute2 (netlink). Egress: the interface's root qdisc (or, with a `match`, a root prio
qdisc steering the matches to it); ingress: the same on an IFB device that the interface's ingress
redirects to (steer.py). Set with replace semantics, journaled with the handle and the IFB's name
before it is applied, and removed on revert, leaving the interface its default qdisc."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
from collections.abc import Iterator
from typing import ClassVar

from pyroute2 import IPRoute, netns
from pyroute2 import config as pyroute2_config
from pyroute2.netlink.exceptions import NetlinkError

from faults.allow import Allowlist
from faults.injectors import steer
from faults.injectors.aim import Aim, own
from faults.injectors.base import FieldError, InjectError, TargetGone, only_keys, word
from faults.injectors.netlink import socket_in

# netns.create forks a helper that pyroute2 ends with SIGTERM: with our handler inherited, that copy of
# this process would run the runner's revert and journal code; with the default handler it just exits.
pyroute2_config.disable_mp_signal = True

ROOT = 0xFFFFFFFF  # TC_H_ROOT
HANDLE = 0x10000  # 1:


def default_route_interfaces() -> set[str]:
    """The host's interfaces with a default route: never a target (it would cut the host off)."""
    with IPRoute() as ipr:
        idx = {r.get_attr("RTA_OIF") for r in ipr.get_default_routes()}
        return {link.get_attr("IFLA_IFNAME") for link in ipr.get_links() if link["index"] in idx}


DEFAULT_ROOTS = {None, "noqueue", "pfifo_fast", "fq_codel", "mq", "fq"}  # what the kernel puts there itself


def missing_module(qdisc: str) -> str:
    return f"this kernel has no sch_{qdisc} (try: modprobe sch_{qdisc})"


LACKING: dict[str, str | None] = {}  # probe_host's answer per qdisc, once per process (modules stay put)


class RootQdisc:
    kind: ClassVar[str]
    aimed: ClassVar[bool] = True
    qdisc: ClassVar[str]
    probe_params: ClassVar[dict]  # a small instance, to see whether the kernel has this qdisc

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"netns", "interface"}, {"interface"})
        word(target, "interface", "an interface name")
        if "netns" in target:
            word(target, "netns", "a network namespace's name")
        Aim.of(params)
        cls.options(own(params))

    @classmethod
    def options(cls, params: dict) -> dict:
        """pyroute2's keyword arguments for this qdisc, from its own params (FieldError)."""
        raise NotImplementedError

    @classmethod
    def check_host(cls, params: dict) -> None:
        """What these params need of this host beyond the kernel's qdisc (FieldError); a hook."""

    @classmethod
    def probe_host(cls) -> str | None:
        """Try the qdisc on the loopback of a network namespace made (and removed) for the purpose."""
        if os.geteuid() != 0:
            return "needs root (CAP_NET_ADMIN)"
        ns = f"llmchaos-probe-{os.getpid()}"
        netns.create(ns)
        try:
            with socket_in(ns) as ipr:
                ipr.tc("add", cls.qdisc, ipr.link_lookup(ifname="lo")[0], HANDLE, **cls.options(cls.probe_params))
        except NetlinkError as e:
            return missing_module(cls.qdisc) if e.code == errno.ENOENT else f"{cls.qdisc}: {e}"
        finally:
            netns.remove(ns)
        return None

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.netns, self.interface, self.allow = target.get("netns"), target["interface"], allow
        self.where = f"{self.interface} in netns {self.netns}" if self.netns else f"{self.interface} (host)"
        ns = f"-n {self.netns} " if self.netns else ""
        self.tc = f"tc {ns}qdisc del dev {self.interface}"  # + root|ingress: how to remove a leftover by hand
        self.mine = False  # a root qdisc of ours is in place (applying again replaces it)

    @contextlib.contextmanager
    def _ns(self) -> Iterator[IPRoute]:
        if os.geteuid() != 0:
            raise InjectError(f"{self.kind} on {self.where}: needs root (CAP_NET_ADMIN)")
        if self.netns and self.netns not in netns.listnetns():
            raise TargetGone(f"{self.kind}: no network namespace {self.netns!r}")
        try:
            ipr = socket_in(self.netns)
        except FileNotFoundError:
            raise TargetGone(f"{self.kind}: no network namespace {self.netns!r}") from None
        try:
            yield ipr
        finally:
            ipr.close()

    def _gone(self) -> TargetGone:
        return TargetGone(f"{self.kind}: no interface {self.where}")

    @contextlib.contextmanager
    def _ipr(self) -> Iterator[tuple[IPRoute, int]]:
        with self._ns() as ipr:
            found = ipr.link_lookup(ifname=self.interface)
            if not found:
                raise self._gone()
            yield ipr, found[0]

    def _on_host(self) -> bool:
        """Whether the target is in this process's own network namespace: no netns, or a name for it."""
        if not self.netns:
            return True
        try:
            ns = os.stat(os.path.join(netns.NETNS_RUN_DIR, self.netns))
        except OSError:
            raise TargetGone(f"{self.kind}: no network namespace {self.netns!r}") from None
        own_ns = os.stat("/proc/self/ns/net")
        return (ns.st_dev, ns.st_ino) == (own_ns.st_dev, own_ns.st_ino)

    @staticmethod
    def _names(ipr: IPRoute, index: int) -> list[str]:
        """The interface's own name, then its altnames (whichever of them the schedule used)."""
        link = ipr.get_links(index)[0]
        props = link.get_attr("IFLA_PROP_LIST")
        return [link.get_attr("IFLA_IFNAME"), *(props.get_attrs("IFLA_ALT_IFNAME") if props else [])]

    def probe(self, params: dict | None = None) -> str | None:
        """Why this target cannot take the fault now, or None; with `params`, FieldError naming what of
        them this kernel or host lacks (an IFB for ingress, sch_prio for a match, a netem table)."""
        try:
            with self._ipr() as (ipr, index):
                return self._refusal(ipr, index, params)
        except InjectError as e:
            return str(e)

    def _refusal(self, ipr: IPRoute, index: int, params: dict | None) -> str | None:
        """probe's answer, on a socket already open in the target's namespace (opening one forks)."""
        aim = Aim.of(params) if params is not None else Aim()
        host = self._on_host()
        names = self._names(ipr, index)
        refused = self.allow.interface(
            None if host else self.netns, names[0], default_route_interfaces() if host else set(), names[1:]
        )
        if refused:
            return refused
        root = self._identity(ipr, index)["kind"]
        if root not in DEFAULT_ROOTS and not self.mine:
            return (
                f"{self.where} already has a root {root} qdisc that this run did not add "
                f"(a leftover? remove it: {self.tc} root)"
            )
        ingress = steer.ingress_kind(ipr, index) if aim.ingress else None
        if ingress is not None:
            return (
                f"{self.where} already has an {ingress} qdisc on its ingress that this run did not add "
                f"(a leftover? remove it: {self.tc} {ingress})"
            )
        if params is not None:
            if self.qdisc not in LACKING:
                LACKING[self.qdisc] = self.probe_host()
            if LACKING[self.qdisc]:
                return LACKING[self.qdisc]
            for need, field in (("match", "match"), ("ingress", "direction")):
                reason = steer.lacks(need) if (aim.rules if need == "match" else aim.ingress) else None
                if reason:
                    raise FieldError(field, reason)
            self.check_host(own(params))
        return None

    def save(self, params: dict) -> dict:
        """This window's own handle (deleting our root qdisc gives the interface back its default), and
        for ingress the name of its IFB device: what a revert, even after a crash, looks for."""
        saved: dict = {"handle": random.randrange(0x1000, 0xF000) << 16}
        if Aim.of(params).ingress:
            saved["ifb"] = steer.ifb_name()
        return saved

    def _add(self, ipr: IPRoute, command: str, index: int, handle: int, parent: int, params: dict) -> None:
        """Put this kind's qdisc at `parent` (a hook: netem sends a distribution table with it)."""
        ipr.tc(command, self.qdisc, index, handle, parent=parent, **self.options(params))

    def _shape(self, ipr: IPRoute, index: int, handle: int, params: dict, rules: tuple) -> str:
        """The fault on `index`'s egress: the qdisc at the root, or under a prio root steering `rules`
        to it; the root's kind."""
        if not rules:
            self._add(ipr, "replace", index, handle, ROOT, params)
            return self.qdisc
        band = steer.add_prio(ipr, index, handle, rules)
        self._add(ipr, "add", index, handle + 0x10000, band, params)
        return "prio"

    def apply(self, name: str, params: dict, saved: dict) -> dict:
        """Put the fault in place; returns `applied`, the root qdisc as read back (kind, handle and
        every option) when it shapes egress, which revert needs to tell it from a qdisc someone put
        there since. A half-applied fault raises, and the runner's revert removes what it left."""
        aim, mine = Aim.of(params), own(params)
        handle = saved.get("handle", HANDLE)
        applied: dict = {}
        with self._ipr() as (ipr, index):
            try:
                reason = self._refusal(ipr, index, params)
            except FieldError as e:
                raise InjectError(f"{e.field}: {e}") from None
            if reason:
                raise InjectError(reason)
            try:
                if aim.egress:
                    kind = self._shape(ipr, index, handle, mine, aim.rules)
                    self.mine = True
                    applied["applied"] = self._identity(ipr, index)
                    if (applied["applied"]["kind"], applied["applied"]["handle"]) != (kind, handle):
                        raise InjectError(f"{self.kind} on {self.where}: applied but not read back")
                if aim.ingress:
                    ifb = steer.add_ifb(ipr, saved["ifb"])
                    self._shape(ipr, ifb, handle, mine, tuple(r.swapped() for r in aim.rules))
                    steer.redirect(ipr, index, ifb)
                    if not steer.is_ours(ipr, index, ifb):
                        raise InjectError(f"{self.kind} on {self.where}: ingress applied but not read back")
            except NetlinkError as e:
                if e.code == errno.ENOENT:
                    raise InjectError(missing_module(self.qdisc)) from None
                raise InjectError(f"{self.kind} on {self.where}: {e}") from None
        return applied

    def revert(self, saved: dict) -> None:
        """Remove the IFB and the ingress redirect of this window (by the IFB's name), and delete the
        root qdisc only if it is the one applied: as read back then (`applied`), else with the handle
        saved; anything else (gone, or someone else's since) is left."""
        with self._ns() as ipr:
            found = ipr.link_lookup(ifname=self.interface)
            index = found[0] if found else None
            try:
                if "ifb" in saved:
                    steer.remove(ipr, index, saved["ifb"])
                if index is not None and self._ours(ipr, index, saved):
                    ipr.tc("del", index=index, parent=ROOT)
            except NetlinkError as e:
                if e.code not in (errno.ENOENT, errno.EINVAL):  # removed meanwhile: already gone
                    raise InjectError(f"{self.kind} revert on {self.where}: {e}") from None
            if "ifb" in saved and (
                ipr.link_lookup(ifname=saved["ifb"]) or (index is not None and steer.is_ours(ipr, index, None))
            ):
                raise InjectError(f"{self.kind} on {self.where}: reverted but {saved['ifb']} still read back")
            if index is None:
                raise self._gone()
            if self._ours(ipr, index, saved):
                raise InjectError(f"{self.kind} on {self.where}: reverted but still read back")
        self.mine = False

    def _ours(self, ipr: IPRoute, index: int, saved: dict) -> bool:
        now = self._identity(ipr, index)
        if "applied" in saved:
            return now == saved["applied"]
        return now["kind"] in (self.qdisc, "prio") and now["handle"] == saved.get("handle", HANDLE)

    def read_back(self) -> dict:
        with self._ipr() as (ipr, index):
            root = self._identity(ipr, index)
        return {"kind": None} if root["kind"] is None else {"kind": root["kind"], "handle": root["handle"]}

    @staticmethod
    def _identity(ipr: IPRoute, index: int) -> dict:
        """The root qdisc's kind, handle and options, as JSON reads them back from the journal."""
        roots = [q for q in ipr.get_qdiscs(index=index) if q["parent"] == ROOT]
        if not roots:
            return {"kind": None, "handle": None, "options": None}
        options = roots[0].get_attr("TCA_OPTIONS")
        return json.loads(
            json.dumps(
                {
                    "kind": roots[0].get_attr("TCA_KIND"),
                    "handle": roots[0]["handle"],
                    "options": options.dump() if options is not None else None,
                }
            )
        )
