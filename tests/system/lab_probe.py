"""Inside the kernel lab (kernel_lab.py): two namespaces joined by a veth pair, a qdisc fault applied by
the real `faults` code, and one-way delays measured with UDP probes; everything comes back as JSON.

    python -m tests.system.lab_probe CASES.json OUT.json

CASES: {name: SPEC}, measured one after another in one boot, each on a veth pair of its own; OUT:
{name: what it measured, or {"error": its traceback}}, so one case's failure is its test's alone.
SPEC: `fault` {kind, params (direction and match beside them), side: a|b, the namespace whose veth0
it targets}; `via`: `injector` (save, apply, probe, revert in this process), `crash` (`llmchaos faults
run`, SIGKILLed once applied, then `llmchaos faults recover`) or `cli` (`llmchaos faults run` to its
end, probes during its window); `probes`: each {name, from: a|b, port, count, gap_ms, size, to:
v4|v4b|v6 (which of the other side's addresses: a has a second IPv4 one)}, run one after another,
before (`baseline`) and during the fault. A case's result: the interfaces' tc state before, during and after,
and each probe's packets:
`sent` [seq, ns] and `received` [seq, ns] (the kernel's receive timestamp; a duplicate appears twice).
Send and receive times come from one kernel's clock, so a packet's delay is their difference.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path

from pyroute2 import netns

from faults.injectors import KINDS
from faults.injectors.netlink import socket_in
from tests.procs import ROOT
from tests.system.netns import NET, veth_pair

SO_TIMESTAMPNS = 35  # SCM_TIMESTAMPNS: the receive time as a struct timespec (Linux)
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33  # beyond wmem_max/rmem_max (root)
IFA_F_NODAD = 0x02  # an IPv6 address usable at once
HEADER = struct.Struct("!Iq")  # seq, send time (ns since the epoch)
V6 = "fd00:198:18:{}::{}"


def sockets(src: str, dst: str, family: int) -> tuple[socket.socket, socket.socket]:
    """A UDP sender in `src` and a receiver in `dst` (a socket stays in the namespace it was made in)."""
    made = []
    for ns in (src, dst):
        netns.pushns(ns)
        try:
            made.append(socket.socket(family, socket.SOCK_DGRAM))
        finally:
            netns.popns()
    tx, rx = made
    rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 1 << 24)  # no probe outruns it: none lost here
    tx.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 1 << 24)
    return tx, rx


def drain(rx: socket.socket, quiet_s: float) -> list[list[int]]:
    """Every datagram, until none has come for `quiet_s`: [seq, the kernel's receive time]."""
    received = []
    while select.select([rx], [], [], quiet_s)[0]:
        data, anc, _, _ = rx.recvmsg(2048, 64)
        stamp = next(d for level, kind, d in anc if (level, kind) == (socket.SOL_SOCKET, SO_TIMESTAMPNS))
        sec, nsec = struct.unpack("qq", stamp[:16])
        received.append([HEADER.unpack_from(data)[0], sec * 1_000_000_000 + nsec])
    return received


def busy() -> float:
    """CPU seconds this kernel has spent not idle so far (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def probe(spec: dict, addrs: dict[str, dict[str, str]], names: dict[str, str], linger_s: float) -> dict:
    """Send spec's packets one every gap_ms (0: back to back), then, `linger_s` after the last, read
    them all: the receiver queues them with their arrival times, so sending is all the lab does while
    they travel (a busy lab is a late one: its clock is the host's)."""
    src, dst = spec["from"], "a" if spec["from"] == "b" else "b"
    address = addrs[dst][spec.get("to", "v4")]
    tx, rx = sockets(names[src], names[dst], socket.AF_INET6 if ":" in address else socket.AF_INET)
    rx.bind((address, spec["port"]))
    if "sport" in spec:
        tx.bind((addrs[src]["v6" if ":" in address else "v4"], spec["sport"]))
    tx.connect((address, spec["port"]))
    pad = b"\0" * max(0, spec.get("size", 64) - HEADER.size)
    sent: list[list[int]] = []
    gap = int(spec.get("gap_ms", 1.0) * 1e6)
    cpu, due = busy(), time.time_ns()
    for seq in range(spec["count"]):
        if (t := time.time_ns()) < due:
            time.sleep((due - t) / 1e9)
            t = time.time_ns()
        tx.send(HEADER.pack(seq, t) + pad)
        sent.append([seq, t])
        due += gap
    time.sleep(linger_s)
    cpu = busy() - cpu
    received = drain(rx, 0.05)
    tx.close()
    rx.close()
    return {"sent": sent, "received": received, "busy_s": cpu, "wall_s": (time.time_ns() - sent[0][1]) / 1e9}


def state(names: dict[str, str]) -> dict:
    """Every interface of both namespaces with its qdiscs and filters, as read back."""
    out = {}
    for side, ns in names.items():
        with socket_in(ns) as ipr:
            links = {
                link["index"]: (link.get_attr("IFLA_IFNAME"), link.get_nested("IFLA_LINKINFO", "IFLA_INFO_KIND"))
                for link in ipr.get_links()
            }
            qdiscs = [
                [
                    links[q["index"]][0],
                    q.get_attr("TCA_KIND"),
                    q["handle"],
                    q["parent"],
                    _dump(q.get_attr("TCA_OPTIONS")),
                ]
                for q in ipr.get_qdiscs()
            ]
            filters = [
                [links[i][0], f["parent"], f.get_attr("TCA_KIND"), f["info"]]
                for i in links
                for parent in (0xFFFF0000, *(q["handle"] for q in ipr.get_qdiscs(index=i)))
                for f in ipr.get_filters(index=i, parent=parent)
            ]
        out[side] = {
            "links": sorted(map(list, links.values())),
            "qdiscs": sorted(qdiscs, key=str),
            "filters": sorted(filters, key=str),
        }
    return out


def _dump(options: object) -> object:
    dumped = options.dump() if hasattr(options, "dump") else options
    return json.loads(json.dumps(dumped, default=str))


def schedule(path: Path, fault: dict, target: dict, duration: str) -> None:
    aim = {k: fault["params"][k] for k in ("direction", "match") if k in fault["params"]}
    params = {k: v for k, v in fault["params"].items() if k not in aim}
    entry = {
        "name": "drill",
        "kind": fault["kind"],
        "target": target,
        "at": "0s",
        "duration": duration,
        "params": params,
        **aim,
    }
    path.write_text(json.dumps({"faults": [entry]}))  # JSON is YAML


def llmchaos(*args: str) -> list[str]:
    return [sys.executable, "-m", "llmchaos.cli", "faults", *args]


def addresses(names: dict[str, str], addr_a: str, addr_b: str) -> dict[str, dict[str, str]]:
    """Each side's addresses (a second IPv4 one on a, IPv6 on both), added to its veth0."""
    net = addr_a.split(".")[2]
    addrs = {
        "a": {"v4": addr_a, "v4b": NET.format(net, 3), "v6": V6.format(net, 1)},
        "b": {"v4": addr_b, "v6": V6.format(net, 2)},
    }
    for side, found in addrs.items():
        with socket_in(names[side]) as ipr:
            idx = ipr.link_lookup(ifname="veth0")[0]
            for key, address in found.items():
                if key != "v4":  # (veth_pair's own)
                    prefix = 64 if ":" in address else 24
                    ipr.addr("add", index=idx, address=address, prefixlen=prefix, flags=IFA_F_NODAD)
    return addrs


def substitute(params: dict, addrs: dict[str, dict[str, str]]) -> dict:
    """`@a.v4b` and the like in the params (a match's addresses) as this run's addresses."""
    text = json.dumps(params)
    for token, address in sorted(((f"@{s}.{k}", v) for s, m in addrs.items() for k, v in m.items()), reverse=True):
        text = text.replace(token, address)
    return json.loads(text)


def applied(names: dict[str, str], before: dict, run: subprocess.Popen) -> dict:
    """The state once a run's fault is in place: changed, and the same on two reads 0.2 s apart (the
    run's start in the lab's kernel took over 30 s once, in a whole make test)."""
    deadline, last = time.monotonic() + 90, before
    while run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        now = state(names)
        if now == last != before:
            return now
        last = now
    return state(names)


def main(cases_path: str, out_path: str) -> None:
    results = {}
    for n, (name, spec) in enumerate(json.loads(Path(cases_path).read_text()).items()):
        work = Path(out_path).parent / f"case-{n}"  # its schedule and journal
        work.mkdir(exist_ok=True)
        try:
            results[name] = measure(spec, work)
        except Exception:  # noqa: BLE001 - its test fails with the traceback; the other cases go on
            results[name] = {"error": traceback.format_exc()}
    Path(out_path).write_text(json.dumps(results))


def measure(spec: dict, work: Path) -> dict:
    out: dict = {"kernel": os.uname().release, "baseline": {}, "probes": {}}
    probes, linger = spec.get("probes", []), spec.get("linger_s", 0.5)
    with veth_pair() as (a, b, addr_a, addr_b):
        names = {"a": a, "b": b}
        addrs = addresses(names, addr_a, addr_b)
        fault = {**spec["fault"], "params": substitute(spec["fault"]["params"], addrs)}
        out["params"] = fault["params"]
        for p in probes:  # neighbours resolved before the fault (else a packet waits for its ARP's delay too)
            probe({**p, "count": 3, "gap_ms": 0}, addrs, names, 0.05)
        if spec.get("baseline"):
            out["baseline"] = {p["name"]: probe(p, addrs, names, linger) for p in probes}
        out["before"] = state(names)
        target = {"netns": names[fault["side"]], "interface": "veth0"}
        via = spec.get("via", "injector")
        if via == "injector":
            injector = KINDS[fault["kind"]](target)
            saved = injector.save(fault["params"])
            saved.update(injector.apply("drill", fault["params"], saved) or {})
            try:
                out["during"] = state(names)
                out["probes"] = {p["name"]: probe(p, addrs, names, linger) for p in probes}
            finally:
                injector.revert(saved)
        else:
            path, journal = work / "schedule.yaml", work / "journal.json"
            schedule(path, fault, target, spec.get("duration", "60s"))
            command = llmchaos("run", str(path), "--journal", str(journal))
            run = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out["during"] = applied(names, out["before"], run)
            if via == "crash":
                run.send_signal(signal.SIGKILL)
            out["probes"] = {p["name"]: probe(p, addrs, names, linger) for p in probes}
            stdout, stderr = run.communicate(timeout=60)
            out["run"] = {"returncode": run.returncode, "stdout": stdout, "stderr": stderr}
            out["killed"] = state(names)
            recover = subprocess.run(
                llmchaos("recover", "--journal", str(journal)), cwd=ROOT, capture_output=True, text=True
            )
            out["recover"] = {"returncode": recover.returncode, "stdout": recover.stdout, "stderr": recover.stderr}
            out["journal"] = json.loads(journal.read_text()) if journal.exists() else None
        out["after"] = state(names)
    return out


if __name__ == "__main__":
    main(*sys.argv[1:])
