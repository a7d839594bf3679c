"""`llmchaos compare` of two runs of 1 million requests each, on one core.

Reference: reading the same two results directories alone (run.json, the histograms and every line
of requests.jsonl through the core's run model), on the same core, in the same run.
Target: the comparison finishes in under 30 s. Both are timed as the CPU time (user + system) of
their process, pinned to one core: on a shared host, wall time also counts the other processes
that run on that core (printed too).
Run from the repo root: python -m benchmarks.compare_large [REQUESTS]
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import ROOT, llmchaos
from benchmarks._synthetic_run import write

REQUESTS, TARGET_S = 1_000_000, 30.0
READ = "import sys\nfrom llmchaos import run\nfor p in sys.argv[1:]:\n    sum(1 for _ in run.load(p).requests())"


def timed(argv: list[str], cpu: int) -> tuple[float, float]:
    """CPU and wall seconds `argv` takes pinned to `cpu` (its output discarded; a failure ends the
    benchmark)."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    r = subprocess.run(
        argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
        check=False,
    )
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):  # 1: B is worse, as made
        raise SystemExit(f"compare_large: {argv[2:4]} exited with {r.returncode}: {r.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def main() -> int:
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else REQUESTS
    cpu = max(os.sched_getaffinity(0))
    tmp = Path(tempfile.mkdtemp(prefix="llmchaos-compare-large-"))
    try:
        print(f"compare_large: writing two runs of {requests:,} requests ...", flush=True)
        a = write(tmp / "a", requests, seed=1, rate=1000.0)
        b = write(tmp / "b", requests, seed=2, rate=1000.0, slowdown=1.05)
        size = sum(f.stat().st_size for d in (a, b) for f in d.iterdir()) / 2**20
        read_s, read_wall = timed([sys.executable, "-c", READ, str(a), str(b)], cpu)
        compare_s, compare_wall = timed([*llmchaos("compare", str(a), str(b), "--json")], cpu)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = compare_s < TARGET_S
    print(
        f"compare_large: {requests:,} requests per run ({size:.0f} MiB on disk), one core (cpu {cpu}): compare "
        f"{compare_s:.1f} s CPU ({compare_wall:.1f} s wall), reading the files alone {read_s:.1f} s CPU "
        f"({read_wall:.1f} s wall), ratio {compare_s / read_s:.2f}; "
        f"target < {TARGET_S:g} s: {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
