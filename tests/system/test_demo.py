"""`make demo`, shortened to 30 s of load: it finishes green by itself, prints the per-phase table
where each fault phase differs visibly from the baseline (a first-token delay in TTFT, the clock lock
in TTFT more than in ITL — it slows a step's math, and decode is mostly memory-bound — the killed
decode engine serving nothing, the KV partition's recomputed prefills in TTFT, the bandwidth limit on
the veth pair in E2E), and leaves no process, fault or namespace."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys

import psutil
import pytest
from pyroute2 import netns

from compose.demo import KV_STALL_S
from llmchaos import run as results
from tests.procs import ROOT


@pytest.mark.timing
def test_the_demo_shows_each_fault_phase_and_cleans_up(tmp_path):
    """The demo, shortened to 30 s, finishes green, each fault phase differs from the baseline, and nothing is left.

    Long (about 55 s here): the whole demo, shortened to 30 s of load: the stack and a namespace of workers up, the
    load with its three fault windows, the report and dashboards written, and everything stopped."""
    r = subprocess.run(
        [sys.executable, "-m", "compose.demo", "--seconds", "30", "--dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    faults = ("first-token-delay", "gpu-at-660mhz", "replica-kill", "kv-partition", "bandwidth-200kbit")
    assert "per phase:" in r.stdout
    for name in faults:
        assert f"  {name} " in r.stdout
    (state,) = tmp_path.iterdir()
    (run_dir,) = (state / "stack" / "results").iterdir()
    loaded = results.load(run_dir)
    assert [w.name for w in loaded.run.faults] == list(faults)
    assert (run_dir / "report.html").stat().st_size > 1000
    assert sorted(p.name for p in (state / "dashboards").iterdir()) == [
        "llmchaos-ab.json",
        "llmchaos-load.json",
        "llmchaos-server.json",
    ]

    def p50(metric: str, phase: str) -> float:
        h = loaded.histograms.combined(metric, phase=phase)
        assert h is not None, (metric, phase)
        return h.quantile(50)

    table = r.stdout[r.stdout.index("per phase:") :]  # what a failure shows: the demo's own figures
    assert p50("ttft", "first-token-delay") > p50("ttft", "baseline") + 0.15, table  # the proxy held 0.25 s
    windows = {w.name: w for w in loaded.run.faults}
    assert all(w.error is None for w in windows.values()), (windows, r.stderr[-3000:])
    requests = [q for q in loaded.requests() if q.outcome == "ok"]

    def ran(name: str) -> tuple[float, float]:
        """When window `name` was in effect: applied and reverted (unix times)."""
        start, end = windows[name].actual_start, windows[name].actual_end
        assert start is not None, windows[name]
        assert end is not None, windows[name]
        return start, end

    def beside(name: str) -> list:
        """The baseline requests of the stretches either side of window `name` (as long as it): the
        machine's load drifts over a run (a busy CI host's other work comes and goes), so a window is
        held to the baseline of its own time, not of the whole run."""
        start, end = ran(name)
        span = end - start
        return [
            q
            for q in requests
            if q.phase == "baseline" and (start - span < q.sent < start or end < q.sent < end + span)
        ]

    def median(values: list[float | None]) -> float:
        assert values
        assert None not in values  # an ok request has its first token and its gaps
        return statistics.median(v for v in values if v is not None)

    # like with like: requests whose KV came over the link (a recompute's wait is the KV link's, held
    # to the partition below)
    locked = [q for q in requests if q.phase == "gpu-at-660mhz" and q.kv == "pulled"]
    near = [q for q in beside("gpu-at-660mhz") if q.kv == "pulled"]
    slower = {
        "ttft": median([q.ttft for q in locked]) / median([q.ttft for q in near]),
        "itl": median([g for q in locked for g in q.gaps]) / median([g for q in near for g in q.gaps]),
    }
    lock_start = ran("gpu-at-660mhz")[0]
    # what a failure shows first (a CI log keeps a message's start): each request's start in the window, TTFT, KV way
    seen = {
        part: [(round(q.sent - lock_start, 1), round(q.ttft or 0, 3), q.kv) for q in phased]
        for part, phased in (("locked", locked), ("near", near))
    }
    assert slower["ttft"] > 1.3, (slower, seen, table)  # the prefill's math at 660 of 1980 MHz
    assert slower["ttft"] > slower["itl"], (slower, seen, table)  # decode follows memory bandwidth, not the lock
    assert "clock lock at 660 MHz (en, p50 over baseline): TTFT x" in r.stdout
    # the generator's error bar on what it measured, per language, and printed with the verdict
    assert {(b.metric, b.percentile) for b in loaded.run.validity.bounds if b.phase is None} >= {
        ("ttft", 99.0),
        ("itl", 99.0),
    }
    assert "the generator's error bar at p99 (events that shared a read's stamp): TTFT " in r.stdout

    # The tbf window, held to the baseline beside it: a stream's time per token (its end over its tokens),
    # several times longer while 200 kbit/s is shared by all the workers' streams.
    def per_token(phased: list) -> float:
        return median([q.e2e / q.output_tokens for q in phased if q.e2e is not None and q.output_tokens])

    throttled = per_token([q for q in requests if q.phase == "bandwidth-200kbit"])
    near = per_token(beside("bandwidth-200kbit"))
    assert throttled > 1.5 * near, (throttled, near, windows["bandwidth-200kbit"], r.stderr[-3000:], table)
    # the killed decode engine served none of the requests that began while it was dead
    killed = [q for q in requests if q.phase == "replica-kill"]
    assert killed
    assert sum(q.replica == "2" for q in killed) <= 0.1 * len(killed), [q.replica for q in killed]
    # The partitioned KV link made decode recompute: the wait for the KV (KV_STALL_S) and the prefill
    # in TTFT. Only while it was partitioned: a request recomputed (one failed over from the killed
    # engine aside) only if it began before the revert and had its first token after the partition
    # began (its pull, which comes before the first token, in the window); and of those that began
    # while it held, up to the wait and half a second before its revert, 80 % or more recomputed (a
    # later one may reach its pull after the revert, queued behind the window's).
    start, end = ran("kv-partition")
    recomputed = [q for q in requests if q.kv == "recomputed" and not q.failed_over]
    assert recomputed
    outside = [q for q in recomputed if not (q.sent < end and q.sent + (q.ttft or 0) > start)]
    logs = (f.read_text() for f in (state / "stack" / "logs").iterdir())
    why = [line for text in logs for line in text.splitlines() if "KV transfer" in line]  # the engines' reasons
    assert outside == [], ([(q.sent - start, q.ttft, q.phase, q.replica) for q in outside], end - start, why, table)
    held = [q for q in requests if start < q.sent < end - KV_STALL_S - 0.5]
    assert held
    shown = [(round(q.sent - start, 2), q.ttft, q.kv, q.replica, q.failed_over) for q in held]  # what a failure shows
    assert sum(q.kv == "recomputed" for q in held) >= 0.8 * len(held), (shown, end - start, why, table)
    partitioned = median([q.ttft for q in requests if q.phase == "kv-partition"])
    assert partitioned > median([q.ttft for q in beside("kv-partition")]) + 0.8 * KV_STALL_S, table
    # Nothing left: no process of the stack (its state dir, or the veth address, in its command line),
    # no fault in the journal, not its namespace (other tests make and remove theirs meanwhile).
    (bind,) = set(re.findall(r"http://(198\.18\.\d+\.1):", r.stdout))
    for part in ("stack", "workers"):
        assert not (state / part / "state.json").exists()
    left = [
        p.info for p in psutil.process_iter(["pid", "cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])
    ]
    left += [p.info for p in psutil.process_iter(["pid", "cmdline"]) if bind in " ".join(p.info["cmdline"] or [])]
    assert left == []
    assert json.loads((state / "journal.json").read_text()) == []
    (ns,) = set(re.findall(r"network namespace (llmc-demo-\w+)", r.stdout))
    assert ns not in netns.listnetns()
