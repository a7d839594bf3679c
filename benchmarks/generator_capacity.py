"""How many SSE events/s one client core drives while its TTFT and ITL stay true: our Locust harness
(one process, the project's locustfile) beside a plain asyncio/aiohttp yardstick, in the same run.

The ground-truth server (`tests.servers.truth`, CPU 0, SCHED_FIFO where allowed) sends each
event at its intended time from a timerfd and logs when it really sent it; each client runs alone
on CPU 1. Per level of streams (60 events a request, ~6 ms gaps, mixed languages) and client:
events/s, the error of TTFT and ITL p50/p99 against the truth of the same requests (client's
percentile minus the truth's), the server's own lateness p99 (over 0.2 ms: the server's fault), and
for our harness its validity verdict from run.json. Tolerance: ITL within 1 ms or 1 % at p50 and
3 ms or 3 % at p99; TTFT within 2 ms or 2 % at p50 and 5 ms or 5 % at p99.
A level also needs its load driven: the events/s at least DRIVEN_MIN of what its streams carry when
each always has a request at the server (a saturated client still timing truly, but sending late,
drives less than it was asked to). Capacity = the events/s of the highest level within tolerance
(two clients at the same level carried the same load: their events/s differ by noise, and count as
1.0x).
Each row also gives the client's CPU (cores) and its CPU per event (and per read, ours: the reads
that brought content events), and our run's data plane (run.json generator.<process>.plane).
Targets: ours >= 1.5x the yardstick's capacity; every level out of tolerance flagged invalid by our
run, and the least loaded one valid. A level within tolerance may be flagged too: the run's error bar
(llmchaos/bounds.py) is what the generator can vouch for, and where its read loop waited for the CPU
it cannot vouch for as much as the truth shows (printed, not a miss).
Run from the repo root: python -m benchmarks.generator_capacity [LEVEL ...]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks import _yardstick
from benchmarks._common import ROOT, process, server
from benchmarks._measured import Measured, pct, truth
from benchmarks.client_throughput import LOCUST, run_pinned
from llmchaos import run

LEVELS = (50, 100, 150, 200, 300, 400, 600)
LANGS = ["en", "de", "fr", "es", "zh", "ja"]
SECONDS, WARMUP = 12.0, 3.0
TOLERANCE = {  # (metric, percentile): (seconds, share of the truth), whichever is larger
    ("ttft", 50): (0.002, 0.02),
    ("ttft", 99): (0.005, 0.05),
    ("itl", 50): (0.001, 0.01),
    ("itl", 99): (0.003, 0.03),
}
DRIVEN_MIN = 0.97  # share of the streams' load a level must drive
SERVER_LATE_S = 0.0002  # the server's lateness p99 beyond which a level is the server's fault
TARGET_RATIO = 1.5  # our capacity over the yardstick's
PY_SERVER = server("truth", "{port}")


def server_command(build_dir: str) -> list[str]:
    """The C ground-truth server built into `build_dir` with the system's cc; the Python one (the same
    wire and truth, slower: its lateness passes 0.2 ms near 60,000 events/s) when there is no cc."""
    exe = os.path.join(build_dir, "truth_server")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return PY_SERVER
    subprocess.run([cc, "-O2", "-o", exe, str(ROOT / "tests" / "servers" / "truth.c")], check=True)
    return [exe, "{port}"]


@dataclass
class Level:
    client: str
    streams: int
    events_s: float
    errors: dict[tuple[str, int], tuple[float, float]]  # (metric, p): (client - truth, tolerance) in s
    late_p99: float  # the server's, s
    realtime: str
    driven: float  # events/s over what the streams carry kept busy back to back
    cpu: float | None = None
    valid: bool | None = None  # our run's own verdict
    why: str = ""
    coalesced: float | None = None  # our run's share of stream reads that brought several events
    lag_p95: float | None = None  # our run's event-loop lag p95, s
    load: float = 0.0  # the machine's 1-minute load average at the end (others' work shares the cores)
    events_per_read: float | None = None  # ours: content events over the reads that brought them
    plane: str = ""  # ours: the data plane its run read on

    @property
    def within(self) -> bool:
        return self.driven >= DRIVEN_MIN and all(abs(err) <= tol for err, tol in self.errors.values())

    @property
    def server_fault(self) -> bool:
        return self.late_p99 > SERVER_LATE_S


def judge(
    client: str, streams: int, measured: dict[str, Measured], server: dict, warmup: float = WARMUP, end: float = SECONDS
) -> Level:
    """A client's measurements against the server's truth over the same window (from `warmup` to
    `end` - 0.5 s after the first start) and requests (those started in it)."""
    t0 = min(m.start_unix for m in measured.values())
    lo, hi = t0 + warmup, t0 + end - 0.5
    events = sum(lo <= t < hi for m in measured.values() for t in m.received())
    ours: dict[str, list[float]] = {"ttft": [], "itl": []}
    true: dict[str, list[float]] = {"ttft": [], "itl": []}
    busy, sent = 0.0, 0  # at the server: seconds from each request's arrival to its last event, events
    for rid, m in measured.items():
        entry = server["requests"].get(rid)
        if m.start_unix < lo or entry is None or len(entry["sent_ns"]) != len(m.gaps) + 1:
            continue
        busy += entry["sent_ns"][-1] / 1e9  # sends count from the arrival
        sent += len(entry["sent_ns"])
        t = truth(entry)
        ours["ttft"].append(m.ttft)
        true["ttft"].append(t.ttft)
        ours["itl"] += m.gaps
        true["itl"] += t.gaps
    errors = {}
    for (metric, p), (abs_tol, rel_tol) in TOLERANCE.items():
        want = pct(true[metric], p)
        errors[(metric, p)] = (pct(ours[metric], p) - want, max(abs_tol, rel_tol * want))
    late = pct([us / 1e6 for us in server["lateness_us"]], 99)
    rate = events / (hi - lo)
    driven = rate / (streams * sent / busy) if busy else 0.0
    return Level(client, streams, rate, errors, late, server["realtime"], driven)


def truth_of(url: str) -> dict:
    return dict(httpx.get(url + "/truth", timeout=60).json())


def yardstick(server: list[str], streams: int) -> Level:
    with process(server, cpu=0, health="/healthz") as (url, _):
        t = time.process_time(), time.monotonic()
        measured = run_pinned(lambda u, n: _yardstick.run(u, n, LANGS, SECONDS), url, streams)
        cpu = (time.process_time() - t[0]) / (time.monotonic() - t[1])
        level = judge("aiohttp", streams, measured, truth_of(url))
    level.cpu = cpu
    return level


def ours(server: list[str], streams: int) -> Level:
    with process(server, cpu=0, health="/healthz") as (url, _), tempfile.TemporaryDirectory() as tmp:
        n = str(streams)
        args = ["--host", url, "--results-dir", tmp, "-u", n, "-r", n, "-t", f"{SECONDS:g}s"]
        args += ["--warmup", f"{WARMUP:g}s", "--langs", ",".join(LANGS), "--max-tokens", "60"]
        subprocess.run(
            [*LOCUST, *args],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, {1}),
            timeout=120,
            check=False,
        )
        (run_dir,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        res = run.load(run_dir)
        lines = list(res.requests())
        measured = {
            r.request_id: Measured(r.intended, r.ttft, r.gaps)
            for r in lines
            if r.outcome == "ok" and r.ttft is not None
        }
        level = judge("locust", streams, measured, truth_of(url))
    gen = res.run.generator.get("local", {})
    level.cpu, level.valid = gen.get("cpu_mean"), res.run.validity.valid
    level.why = "; ".join(res.run.validity.reasons or res.run.validity.flags)
    level.coalesced = res.run.reads.coalesced / max(res.run.reads.reads, 1)
    level.lag_p95 = gen.get("loop_lag_p95_s")
    level.plane = gen.get("plane", "")
    reads = sum(r.reads or 0 for r in lines)
    level.events_per_read = sum(len(r.gaps) + 1 for r in lines if r.ttft is not None) / reads if reads else None
    return level


def row(lv: Level) -> str:
    errs = " ".join(f"{lv.errors[k][0] * 1000:+7.2f}" for k in TOLERANCE)
    valid = "" if lv.valid is None else ("valid" if lv.valid else "INVALID")
    cpu = f"{lv.cpu:4.2f}" if lv.cpu is not None else "   -"
    watch = (
        f"{100 * lv.coalesced:6.2f} {lv.lag_p95 * 1000:6.1f}"
        if lv.coalesced is not None and lv.lag_p95 is not None
        else f"{'-':>6} {'-':>6}"
    )
    per_event = lv.cpu / lv.events_s * 1e6 if lv.cpu is not None and lv.events_s else None
    per_read = per_event * lv.events_per_read if per_event is not None and lv.events_per_read else None
    costs = " ".join(f"{x:6.1f}" if x is not None else f"{'-':>6}" for x in (per_event, per_read))
    return (
        f"{lv.client + (' ' + lv.plane if lv.plane else ''):15} {lv.streams:5d} {lv.events_s:9.0f}"
        f" {100 * lv.driven:5.1f} {errs} {lv.late_p99 * 1000:8.3f}{'!' if lv.server_fault else ' '} {cpu} {costs}"
        f" {watch} {lv.load:4.1f} {'yes' if lv.within else 'NO':>6} {valid:8} {lv.why}"
    )


def capacity(levels: list[Level]) -> float:
    """Events/s at the highest level within tolerance that the server kept (0 when none)."""
    kept = [lv for lv in levels if lv.within and not lv.server_fault]
    return max((lv.events_s for lv in kept), default=0.0)


def main(argv: list[str]) -> int:
    streams = [int(a) for a in argv] or list(LEVELS)
    results: dict[str, list[Level]] = {"locust": [], "aiohttp": []}
    heads = " ".join(f"{m} p{p}".rjust(7) for m, p in TOLERANCE)
    print(
        f"{'client':15} {'strms':>5} {'events/s':>9} {'drv%':>5} {heads} {'late p99':>8}  {'cpu':>4} {'us/ev':>6} "
        f"{'us/rd':>6} {'coal%':>6} {'lag95':>6} {'load':>4} {'within':>6} validity"
    )
    print(f"{'':37} {'error vs truth, ms':^31} {'ms (!: server)':>14} {'CPU per event, read':>19}")
    with tempfile.TemporaryDirectory() as build:
        server = server_command(build)
        for n in streams:
            for measure in (ours, yardstick):
                lv = measure(server, n)
                lv.load = os.getloadavg()[0]
                results[lv.client].append(lv)
                print(row(lv), flush=True)
    cap = {c: capacity(lvs) for c, lvs in results.items()}
    ratio = cap["locust"] / cap["aiohttp"] if cap["aiohttp"] else float("inf") if cap["locust"] else float("nan")
    print(f"server: {results['locust'][0].realtime}")
    print(f"capacity: locust {cap['locust']:.0f} events/s, aiohttp {cap['aiohttp']:.0f} events/s, ratio {ratio:.2f}")
    kept = [lv for lv in results["locust"] if not lv.server_fault]
    vouched_wrong = [lv.streams for lv in kept if lv.valid and not lv.within]
    cautious = [lv.streams for lv in kept if lv.within and not lv.valid]
    least = min(results["locust"], key=lambda lv: lv.streams)
    flag_ok = not vouched_wrong and (least.valid or least.server_fault)
    met = cap["aiohttp"] > 0 and ratio >= TARGET_RATIO
    print(f"target (>= {TARGET_RATIO:g}x aiohttp's capacity): {'met' if met else 'NOT met'}")
    print(
        f"validity flag (never valid out of tolerance, valid at {least.streams} streams): "
        f"{'right' if flag_ok else 'WRONG'}"
        + (f"; called valid out of tolerance at {vouched_wrong} streams" if vouched_wrong else "")
        + (f"; within tolerance but its error bar could not vouch for it at {cautious} streams" if cautious else "")
    )
    print(json.dumps({"capacity": cap, "ratio": ratio}))
    return 0 if met and flag_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
