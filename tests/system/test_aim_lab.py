"""direction and match measured on a real kernel (the lab): the fault sits on b's veth0; `out` probes
go b -> a (b's egress), `in` probes a -> b (b's ingress, through the IFB); a match aims at the
connections it names and every other packet keeps its baseline (its median within 1 ms, over 200 packets each).
A run SIGKILLed in its window leaves its qdiscs, IFB and filters to `llmchaos faults recover`, which
restores both namespaces exactly; a kernel without ifb or sch_prio is refused before anything is applied.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.system import kernel_lab
from tests.system.netem_lab import delays

pytestmark = pytest.mark.timing  # times packets

DELAY_MS = 50
COUNT = 200  # 2 ms apart: the median of 200 is steady to a few microseconds


def flow(name: str, delayed: bool, side: str = "b", port: int = 9001, **more: object) -> dict:
    return {"name": name, "from": side, "port": port, "count": COUNT, "gap_ms": 2.0, "delayed": delayed, **more}


def spec(params: dict, *probes: dict, kind: str = "netem", **more: object) -> dict:
    return {"fault": {"kind": kind, "side": "b", "params": params}, "probes": list(probes), "baseline": True, **more}


def check_flows(out: dict, probes: tuple[dict, ...]) -> None:
    """Each delayed flow by the delay (median within 2 ms, none early), each other one at its baseline
    (median within 1 ms, under 2 % of its packets as late as the delay). Medians, not means: the lab's
    kernel is a process that the host may hold off its CPU for tens of milliseconds now and then."""
    lines = []
    for p in probes:
        base, d = delays(out["baseline"][p["name"]]), delays(out["probes"][p["name"]])
        lines.append(f"{p['name']}: median {np.median(d):.3f} ms, max {d.max():.3f} (baseline {np.median(base):.3f})")
        assert len(d) == COUNT, p["name"]
        if p["delayed"]:
            assert d.min() >= DELAY_MS, lines[-1]
            assert abs(np.median(d) - DELAY_MS) <= 2, lines[-1]
        else:
            assert abs(np.median(d) - np.median(base)) <= 1.0, lines[-1]
            assert (d >= DELAY_MS).mean() < 0.02, lines[-1]
    print(f"\n{out['params']}, kernel {out['kernel']}: " + "; ".join(lines))
    assert out["after"] == out["before"], "the revert left something behind"


@pytest.mark.parametrize(
    ("direction", "out_delayed", "in_delayed"),
    [("egress", True, False), ("ingress", False, True), ("both", True, True)],
)
def test_direction_delays_the_way_it_names(lab, direction, out_delayed, in_delayed):
    """egress delays what b sends, ingress what it receives (through an IFB), both both; the rest keeps its baseline.

    Long (about 34 s here): it boots the kernel lab (one CPU) and runs the probe in it; the probes themselves, 200
    packets 2 ms apart each way before and during the fault, take a few seconds."""
    probes = (flow("out", out_delayed), flow("in", in_delayed, side="a"))
    out = lab(spec({"delay": f"{DELAY_MS}ms", "direction": direction}, *probes))
    check_flows(out, probes)
    ifbs = [link for link in out["during"]["b"]["links"] if link[1] == "ifb"]
    assert len(ifbs) == (direction != "egress")


MATCHES = {
    "port": (
        {"dport": 9001},
        [
            flow("9001", True),
            flow("9002", False, port=9002),
            flow("9001-v6", True, to="v6"),
            flow("9002-v6", False, port=9002, to="v6"),
        ],
    ),
    "dst-and-ports": (
        {"dst": "@a.v4b/32", "dport": [9001, 9003]},
        [
            flow("v4b:9001", True, to="v4b"),
            flow("v4b:9003", True, port=9003, to="v4b"),
            flow("v4:9001", False),
            flow("v4b:9002", False, port=9002, to="v4b"),
        ],
    ),
    "src-and-sport": (
        {"src": "@b.v4", "sport": 7001},
        [flow("from 7001", True, sport=7001), flow("from 7002", False, sport=7002)],
    ),
}


@pytest.mark.parametrize("case", sorted(MATCHES))
def test_a_match_delays_only_the_connections_it_names(lab, case):
    match, probes = MATCHES[case]
    out = lab(spec({"delay": f"{DELAY_MS}ms", "match": match}, *probes))
    check_flows(out, tuple(probes))


@pytest.mark.parametrize("direction", ["ingress", "both"])
def test_an_ingress_match_names_the_connection_and_delays_its_answers(lab, direction):
    """match {dst: a, dport: 9001} on b: b's packets to a:9001 (egress), a's answers from port 9001 (ingress)."""
    probes = (
        flow("to a:9001", direction == "both"),
        flow("a:9001 answers", True, side="a", port=9500, sport=9001),
        flow("a:9002 answers", False, side="a", port=9500, sport=9002),
        flow("to a:9002", False, port=9002),
    )
    params = {"delay": f"{DELAY_MS}ms", "direction": direction, "match": {"dst": "@a.v4", "dport": 9001}}
    check_flows(lab(spec(params, *probes)), probes)


def burst(name: str, side: str = "b", port: int = 9001) -> dict:
    return {"name": name, "from": side, "port": port, "count": 300, "gap_ms": 0, "size": 1000}


def spacing_ms(result: dict, skip: int = 20) -> float:
    """The median gap between arrivals, after the first `skip` (a bucket's burst passes at once)."""
    arrival = np.sort([t for _, t in result["received"]]) / 1e6
    return float(np.median(np.diff(arrival[skip:])))


TBF = {"rate": "8mbit", "burst": 16384, "latency": "1000ms"}  # a queue long enough to keep all 300
TBF_GAP_MS = (1000 + 8 + 20 + 14) * 8 / 8e6 * 1e3  # a packet of 1000 bytes with its headers at 8 Mbit/s


@pytest.mark.parametrize(
    ("aim", "limited", "free"),
    [({"direction": "ingress"}, "in", "out"), ({"match": {"dport": 9001}}, "9001", "9002")],
    ids=["ingress", "match"],
)
def test_tbf_limits_only_what_it_aims_at(lab, aim, limited, free):
    probes = {"in": burst("in", side="a"), "out": burst("out"), "9001": burst("9001"), "9002": burst("9002", port=9002)}
    out = lab(spec({**TBF, **aim}, probes[limited], probes[free], kind="tbf", baseline=False))
    gap, free_gap = spacing_ms(out["probes"][limited]), spacing_ms(out["probes"][free])
    print(
        f"\ntbf {out['params']}, kernel {out['kernel']}, 300 packets of 1000 bytes: {limited} {gap:.4f} ms apart "
        f"(8mbit: {TBF_GAP_MS:.4f}), {free} {free_gap:.4f} ms apart"
    )
    assert len(out["probes"][limited]["received"]) == 300
    assert abs(gap - TBF_GAP_MS) <= 0.03 * TBF_GAP_MS
    assert free_gap < TBF_GAP_MS / 4
    assert out["after"] == out["before"]


@pytest.mark.parametrize(
    "aim", [{}, {"direction": "both", "match": {"dport": 9001}}], ids=["egress", "both-with-match"]
)
def test_a_sigkilled_run_is_recovered_to_exactly_the_original_qdiscs(lab, aim):
    """`faults run` SIGKILLed in its window leaves its qdiscs; `faults recover` restores both namespaces exactly.

    Long (about 40 s here): it boots the kernel lab (one CPU) and starts two llmchaos commands in it, `faults run`
    until it has applied the fault, then `faults recover`."""
    out = lab({**spec({"delay": f"{DELAY_MS}ms", **aim}), "baseline": False, "via": "crash"})
    during, killed = out["during"]["b"], out["killed"]["b"]
    print(f"\nSIGKILL in the window of {out['params']}: recover said {out['recover']['stdout'].strip()!r}")
    assert during != out["before"]["b"], out.get("run")  # the run's output: why nothing was applied
    assert killed == during  # nothing ran to undo it ...
    assert out["recover"]["returncode"] == 0, out["recover"]
    assert out["recover"]["stdout"].startswith("reverted netem drill")
    assert out["after"] == out["before"]  # ... until recover: every qdisc, filter and link as it was
    assert out["journal"] == []


@pytest.mark.parametrize(
    ("missing", "aim", "field"),
    [("ifb", {"direction": "ingress"}, "direction"), ("sch_prio", {"match": {"dport": 9001}}, "match")],
)
def test_a_kernel_without_what_the_aim_needs_is_refused_before_anything_is_applied(lab, missing, aim, field):
    """A kernel without ifb (for ingress) or sch_prio (for a match): `faults run` exits 2 in one line, nothing applied.

    Long (30 to 40 s here for each case): it boots the kernel lab (one CPU) without that module and starts two
    llmchaos commands in it, `faults run` and `faults recover`."""
    modules = tuple(m for m in kernel_lab.NET_MODULES if m != missing)
    out = lab({**spec({"delay": f"{DELAY_MS}ms", **aim}), "baseline": False, "via": "cli"}, modules=modules)
    run = out["run"]
    print(f"\nwithout {missing}: exit {run['returncode']}: {run['stderr'].strip()}")
    assert run["returncode"] == 2
    assert len(run["stderr"].strip().splitlines()) == 1
    assert f"faults[0].{field}: this kernel has no {missing} (try: modprobe {missing})" in run["stderr"]
    assert out["during"] == out["before"] == out["after"]
    assert out["journal"] in (None, [])
