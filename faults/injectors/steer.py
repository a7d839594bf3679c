"""Steering traffic into a qdisc fault, through pyroute2: a `match` as a prio qdisc whose fourth band
(which no priority maps to) holds the fault and takes what u32 filters send it; `ingress` as the
interface's ingress qdisc redirecting everything (mirred) to an IFB device, whose egress holds it.

u32 reads ports at fixed offsets: behind an IPv4 header without options, in its first fragment, or an
IPv6 header whose next header is TCP or UDP itself (no extension header); a packet with a port that
lies elsewhere is left unmatched, never mismatched.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import os
from collections.abc import Callable, Iterator

from pyroute2 import IPRoute, netns
from pyroute2.netlink.exceptions import NetlinkError

from faults.injectors.aim import Network, Rule
from faults.injectors.netlink import socket_in

ETH_P_ALL, ETH_P_IP, ETH_P_IPV6 = 0x0003, 0x0800, 0x86DD
INGRESS = 0xFFFF0000  # the ingress qdisc's handle (ffff:)
INGRESS_PARENT = 0xFFFFFFF1  # TC_H_INGRESS
BAND = 4  # the prio band that holds the fault: bands 1-3 take the default priomap, band 4 only the matches
PRIOMAP = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]  # prio's own default: never band 4
PROTOCOLS = (6, 17)  # a port means TCP or UDP
IFB_PREFIX = "lcifb"
# (src, dst, next protocol, ports) as (offset of the field's first 32-bit word, mask of a protocol byte)
LAYOUT = {4: (12, 16, (8, 0x00FF0000), 20), 6: (8, 24, (4, 0x0000FF00), 40)}
PORTS_GUARD = {4: ["0x05000000/0x0f000000+0", "0x00000000/0x00001fff+4"], 6: []}  # IHL 5; first fragment


def ifb_name() -> str:
    return f"{IFB_PREFIX}{os.urandom(4).hex()}"


def _words(net: Network, offset: int) -> list[str]:
    """u32 keys (`value/mask+offset`) for one address field holding `net`."""
    size = net.max_prefixlen // 8
    value, mask = int(net.network_address), int(net.netmask)
    keys = []
    for i in range(size // 4):
        shift = 8 * (size - 4 * (i + 1))
        m = (mask >> shift) & 0xFFFFFFFF
        if m:
            keys.append(f"0x{(value >> shift) & m:08x}/0x{m:08x}+{offset + 4 * i}")
    return keys


def u32_keys(rule: Rule) -> Iterator[tuple[int, list[str]]]:
    """(ethertype, keys) of each filter a rule needs: one per protocol when it names a port."""
    src, dst, (proto_at, proto_mask), ports_at = LAYOUT[rule.family]
    keys = []
    if rule.src is not None:
        keys += _words(rule.src, src)
    if rule.dst is not None:
        keys += _words(rule.dst, dst)
    ethertype = ETH_P_IP if rule.family == 4 else ETH_P_IPV6
    if rule.sport is None and rule.dport is None:
        yield ethertype, keys or ["0x0/0x0+0"]
        return
    value = ((rule.sport or 0) << 16) | (rule.dport or 0)
    mask = (0xFFFF0000 if rule.sport else 0) | (0xFFFF if rule.dport else 0)
    shift = (proto_mask & -proto_mask).bit_length() - 1  # where the protocol byte sits in its word
    ports = f"0x{value:08x}/0x{mask:08x}+{ports_at}"
    for proto in PROTOCOLS:
        yield (
            ethertype,
            [*PORTS_GUARD[rule.family], *keys, f"0x{proto << shift:08x}/0x{proto_mask:08x}+{proto_at}", ports],
        )


def add_prio(ipr: IPRoute, index: int, handle: int, rules: tuple[Rule, ...]) -> int:
    """A root prio qdisc (replacing the root) whose filters send the matches to band 4; its handle."""
    ipr.tc("replace", "prio", index, handle, bands=BAND, priomap=PRIOMAP)
    for rule in rules:
        for ethertype, keys in u32_keys(rule):
            prio = 1 if ethertype == ETH_P_IP else 2  # one filter priority per protocol
            ipr.tc(
                "add-filter",
                "u32",
                index,
                parent=handle,
                prio=prio,
                protocol=ethertype,
                target=handle | BAND,
                keys=keys,
            )
    return handle | BAND


def add_ifb(ipr: IPRoute, name: str) -> int:
    """An IFB device `name`, up; its index."""
    ipr.link("add", ifname=name, kind="ifb")
    index = ipr.link_lookup(ifname=name)[0]
    ipr.link("set", index=index, state="up")
    return index


def redirect(ipr: IPRoute, index: int, ifb: int) -> None:
    """Everything arriving on `index` goes through the IFB's egress first (ingress qdisc + mirred)."""
    ipr.tc("add", "ingress", index, INGRESS)
    _redirect_all(ipr, index, ifb)


def _redirect_all(ipr: IPRoute, index: int, ifb: int) -> None:
    action = {"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": ifb}
    ipr.tc(
        "add-filter",
        "u32",
        index,
        parent=INGRESS,
        prio=1,
        protocol=ETH_P_ALL,
        target=1,
        keys=["0x0/0x0+0"],
        action=action,
    )


def ingress_kind(ipr: IPRoute, index: int) -> str | None:
    """The qdisc on the interface's ingress hook (ingress or clsact), None when there is none."""
    found = [q.get_attr("TCA_KIND") for q in ipr.get_qdiscs(index=index) if q["parent"] == INGRESS_PARENT]
    return found[0] if found else None


def _redirects(ipr: IPRoute, index: int) -> list[int | None]:
    """For each filter on the ingress qdisc: the ifindex it redirects to (0: a device gone since), or
    None when it does anything else."""
    found: list[int | None] = []
    for f in ipr.get_filters(index=index, parent=INGRESS):
        options = f.get_attr("TCA_OPTIONS")
        if f.get_attr("TCA_KIND") == "u32" and (options is None or options.get_attr("TCA_U32_SEL") is None):
            continue  # u32's own hash table entries
        acts = options.get_attr("TCA_U32_ACT") if f.get_attr("TCA_KIND") == "u32" else None
        if acts is None:
            found.append(None)
            continue
        for _, act in acts["attrs"]:
            parms = act.get_nested("TCA_ACT_OPTIONS", "TCA_MIRRED_PARMS")
            found.append(parms["ifindex"] if act.get_attr("TCA_ACT_KIND") == "mirred" and parms else None)
    return found


def is_ours(ipr: IPRoute, index: int, ifb: int | None) -> bool:
    """Whether the ingress qdisc is one `redirect` put there for our IFB (or for a device gone since)."""
    if ingress_kind(ipr, index) != "ingress":
        return False
    targets = _redirects(ipr, index)
    return bool(targets) and all(t is not None and t in (ifb, 0) for t in targets)


def remove(ipr: IPRoute, index: int | None, name: str) -> None:
    """Undo `redirect` (if the ingress qdisc is still ours) and remove the IFB device (if still there)."""
    found = ipr.link_lookup(ifname=name)
    ifb = found[0] if found else None
    if index is not None and is_ours(ipr, index, ifb):
        _gone_ok(lambda: ipr.tc("del", "ingress", index, INGRESS))
    if ifb is not None:
        _gone_ok(lambda: ipr.link("del", index=ifb))


def _gone_ok(call: Callable[[], object]) -> None:
    try:
        call()
    except NetlinkError as e:
        if e.code not in (errno.ENOENT, errno.EINVAL, errno.ENODEV):  # removed meanwhile
            raise


@functools.cache
def lacks(need: str) -> str | None:
    """Why this kernel cannot steer (`match`: sch_prio and cls_u32; `ingress`: ifb, sch_ingress and
    act_mirred), tried on the loopback of a network namespace made (and removed) for the purpose; None
    when it can. Once per process: modules do not come and go during a run."""
    ns = f"llmchaos-probe-{need}-{os.getpid()}"
    netns.create(ns)
    try:
        with socket_in(ns) as ipr:
            lo = ipr.link_lookup(ifname="lo")[0]
            rule = Rule(4, ipaddress.ip_network("127.0.0.1"), None, 80, None)
            steps: dict[str, Callable[[], object]] = (
                {
                    "sch_prio": lambda: ipr.tc("add", "prio", lo, 0x10000, bands=BAND, priomap=PRIOMAP),
                    "cls_u32": lambda: add_prio(ipr, lo, 0x10000, (rule,)),
                }
                if need == "match"
                else {
                    "ifb": lambda: add_ifb(ipr, f"{IFB_PREFIX}probe"),
                    "sch_ingress": lambda: ipr.tc("add", "ingress", lo, INGRESS),
                    "cls_u32 act_mirred": lambda: _redirect_all(ipr, lo, lo),
                }
            )
            for modules, step in steps.items():
                try:
                    step()
                except NetlinkError as e:
                    names = " or ".join(modules.split())
                    hint = f"modprobe -a {modules}" if " " in modules else f"modprobe {modules}"
                    return f"this kernel has no {names} (try: {hint}), which {need} needs: {e.args[1]}"
    finally:
        netns.remove(ns)
    return None
