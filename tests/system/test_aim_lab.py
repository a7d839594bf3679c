"""direction and match measured on a real kernel (the lab): the fault sits on b's veth0; `out` probes
go b -> a (b's egress), `in` probes a -> b (b's ingress, through the IFB); a match aims at the
connections it names and every other packet keeps its baseline (its median within 1 ms, over 200 packets each).
A run SIGKILLed in its window leaves its qdiscs, IFB and filters to `llmchaos faults recover`, which
restores both namespaces exactly; a kernel without ifb or sch_prio is refused before anything is applied.
Each test names its case of CASES (at the end), which conftest's `lab` measures with the module's others.
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


DIRECTIONS = {"egress": (True, False), "ingress": (False, True), "both": (True, True)}  # (out delayed, in delayed)


def direction_flows(case: str) -> tuple[dict, dict]:
    out_delayed, in_delayed = DIRECTIONS[case]
    return flow("out", out_delayed), flow("in", in_delayed, side="a")


@pytest.mark.parametrize("case", sorted(DIRECTIONS))
def test_direction_delays_the_way_it_names(lab, case):
    """egress delays what b sends, ingress what it receives (through an IFB), both both; the rest keeps its baseline.

    Long for the module's first test (its boot of the kernel lab, one CPU, with every case of the module): each case
    itself, 200 packets 2 ms apart each way before and during the fault, takes a few seconds."""
    check_flows(out := lab(case), direction_flows(case))
    ifbs = [link for link in out["during"]["b"]["links"] if link[1] == "ifb"]
    assert len(ifbs) == (case != "egress")


MATCHES: dict[str, tuple[dict, list[dict]]] = {
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


@pytest.mark.parametrize("case", [f"match {name}" for name in sorted(MATCHES)])
def test_a_match_delays_only_the_connections_it_names(lab, case):
    check_flows(lab(case), tuple(MATCHES[case.removeprefix("match ")][1]))


def answer_flows(direction: str) -> tuple[dict, ...]:
    """For match {dst: a, dport: 9001} on b: b's packets to a:9001 (egress), a's answers from port 9001 (ingress)."""
    return (
        flow("to a:9001", direction == "both"),
        flow("a:9001 answers", True, side="a", port=9500, sport=9001),
        flow("a:9002 answers", False, side="a", port=9500, sport=9002),
        flow("to a:9002", False, port=9002),
    )


@pytest.mark.parametrize("case", ["answers ingress", "answers both"])
def test_an_ingress_match_names_the_connection_and_delays_its_answers(lab, case):
    """match {dst: a, dport: 9001} on b: b's packets to a:9001 (egress), a's answers from port 9001 (ingress)."""
    check_flows(lab(case), answer_flows(case.removeprefix("answers ")))


def burst(name: str, side: str = "b", port: int = 9001) -> dict:
    return {"name": name, "from": side, "port": port, "count": 300, "gap_ms": 0, "size": 1000}


def spacing_ms(result: dict, skip: int = 20) -> float:
    """The median gap between arrivals, after the first `skip` (a bucket's burst passes at once)."""
    arrival = np.sort([t for _, t in result["received"]]) / 1e6
    return float(np.median(np.diff(arrival[skip:])))


TBF = {"rate": "8mbit", "burst": 16384, "latency": "1000ms"}  # a queue long enough to keep all 300
TBF_GAP_MS = (1000 + 8 + 20 + 14) * 8 / 8e6 * 1e3  # a packet of 1000 bytes with its headers at 8 Mbit/s


TBF_AIMS = {  # case: (aim, the burst it limits, the burst it leaves free)
    "tbf ingress": ({"direction": "ingress"}, burst("in", side="a"), burst("out")),
    "tbf match": ({"match": {"dport": 9001}}, burst("9001"), burst("9002", port=9002)),
}


@pytest.mark.parametrize("case", sorted(TBF_AIMS))
def test_tbf_limits_only_what_it_aims_at(lab, case):
    limited, free = (b["name"] for b in TBF_AIMS[case][1:])
    out = lab(case)
    gap, free_gap = spacing_ms(out["probes"][limited]), spacing_ms(out["probes"][free])
    print(
        f"\ntbf {out['params']}, kernel {out['kernel']}, 300 packets of 1000 bytes: {limited} {gap:.4f} ms apart "
        f"(8mbit: {TBF_GAP_MS:.4f}), {free} {free_gap:.4f} ms apart"
    )
    assert len(out["probes"][limited]["received"]) == 300
    assert abs(gap - TBF_GAP_MS) <= 0.03 * TBF_GAP_MS
    assert free_gap < TBF_GAP_MS / 4
    assert out["after"] == out["before"]


@pytest.mark.parametrize("case", ["sigkill egress", "sigkill both-with-match"])
def test_a_sigkilled_run_is_recovered_to_exactly_the_original_qdiscs(lab, case):
    """`faults run` SIGKILLed in its window leaves its qdiscs; `faults recover` restores both namespaces exactly."""
    out = lab(case)
    during, killed = out["during"]["b"], out["killed"]["b"]
    print(f"\nSIGKILL in the window of {out['params']}: recover said {out['recover']['stdout'].strip()!r}")
    assert during != out["before"]["b"], out.get("run")  # the run's output: why nothing was applied
    assert killed == during  # nothing ran to undo it ...
    assert out["recover"]["returncode"] == 0, out["recover"]
    assert out["recover"]["stdout"].startswith("reverted netem drill")
    assert out["after"] == out["before"]  # ... until recover: every qdisc, filter and link as it was
    assert out["journal"] == []


WITHOUT: dict[str, tuple[dict, str]] = {
    "ifb": ({"direction": "ingress"}, "direction"),
    "sch_prio": ({"match": {"dport": 9001}}, "match"),
}


@pytest.mark.parametrize("case", [f"without {module}" for module in sorted(WITHOUT)])
def test_a_kernel_without_what_the_aim_needs_is_refused_before_anything_is_applied(lab, case):
    """A kernel without ifb (for ingress) or sch_prio (for a match): `faults run` exits 2 in one line, nothing applied.

    Both cases run in one kernel lab booted without either module (each aim needs only its own), a boot of conftest's
    `lab` at the module's start."""
    missing = case.removeprefix("without ")
    field = WITHOUT[missing][1]
    out = lab(case)
    run = out["run"]
    print(f"\nwithout {missing}: exit {run['returncode']}: {run['stderr'].strip()}")
    assert run["returncode"] == 2
    assert len(run["stderr"].strip().splitlines()) == 1
    assert f"faults[0].{field}: this kernel has no {missing} (try: modprobe {missing})" in run["stderr"]
    assert out["during"] == out["before"] == out["after"]
    assert out["journal"] in (None, [])


DELAY = {"delay": f"{DELAY_MS}ms"}
CASES = {  # what conftest's `lab` measures, in one boot per set of modules
    **{case: spec({**DELAY, "direction": case}, *direction_flows(case)) for case in DIRECTIONS},
    **{f"match {name}": spec({**DELAY, "match": match}, *probes) for name, (match, probes) in MATCHES.items()},
    **{
        f"answers {d}": spec({**DELAY, "direction": d, "match": {"dst": "@a.v4", "dport": 9001}}, *answer_flows(d))
        for d in ("ingress", "both")
    },
    **{
        case: spec({**TBF, **aim}, limited, free, kind="tbf", baseline=False)
        for case, (aim, limited, free) in TBF_AIMS.items()
    },
    "sigkill egress": {**spec(DELAY), "baseline": False, "via": "crash"},
    "sigkill both-with-match": {
        **spec({**DELAY, "direction": "both", "match": {"dport": 9001}}),
        "baseline": False,
        "via": "crash",
    },
    **{
        f"without {missing}": {
            **spec({**DELAY, **aim}),
            "baseline": False,
            "via": "cli",
            "modules": [m for m in kernel_lab.NET_MODULES if m not in WITHOUT],  # one boot for both
        }
        for missing, (aim, _) in WITHOUT.items()
    },
}
