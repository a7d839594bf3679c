"""How long the `llmchaos` command takes to start: the CPU time (user + system) of `llmchaos --help` and
`llmchaos faults run --help`, each a fresh process that imports the dispatcher, finds every component's
entry point, builds the whole parser and prints its help.

Reference: the bare interpreter's start (`python -c pass`) in the same run, rounds interleaved so
that a busy machine slows all three alike; the ratio to it is printed. CPU time, not wall time: on
a shared host, wall time also counts the other processes that run meanwhile.
Target: each under 0.3 s of CPU (the median of ROUNDS rounds).
Run from the repo root: python -m benchmarks.cli_start
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks._common import ROOT, llmchaos

ROUNDS, TARGET_S = 7, 0.3
REFERENCE = "python -c pass (reference)"


def command() -> list[str]:
    """`llmchaos` as a user runs it: the console script beside this interpreter (else `-m llmchaos.cli`)."""
    script = Path(sys.executable).with_name("llmchaos")
    return [str(script)] if script.is_file() else llmchaos()


def cpu(argv: list[str]) -> float:
    """CPU seconds (user + system) of `argv` run to its end (a failure ends the benchmark)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"cli_start: {' '.join(argv)} exited with {r.returncode}: {r.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    cli = command()
    runs = {
        REFERENCE: [sys.executable, "-c", "pass"],
        "llmchaos --help": [*cli, "--help"],
        "llmchaos faults run --help": [*cli, "faults", "run", "--help"],
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, argv in runs.items():
            times[name].append(cpu(argv))
    median = {name: statistics.median(t) for name, t in times.items()}
    bare = max(median[REFERENCE], 1e-6)
    print(f"cli_start: CPU (user + system) per process, median of {ROUNDS} rounds")
    for name, t in times.items():
        ratio = median[name] / bare
        print(f"  {name:28} {median[name] * 1000:6.0f} ms  {ratio:5.1f}x the bare start  (min {min(t) * 1000:.0f} ms)")
    ok = all(median[name] < TARGET_S for name in runs if name != REFERENCE)
    print(f"cli_start: target each under {TARGET_S:g} s of CPU: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
