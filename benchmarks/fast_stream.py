"""The generator against targets that outpace it, on each data plane, one user, one language,
`-t RUN_S`: a target that streams faster than it can judge (issue 34, item 1: tests/servers/flood.py,
one-character content events written as fast as the socket takes them), and one whose answers each
carry an event of 2 MB, whose tokens take a second or so to count (item 20: tests/servers/scripted.py's
huge mode), which the stop must not wait for.

Reference: the same run against the same server answering 10 events a request (the scripted one's
short answers for the huge events), in the same process. Printed per plane: the events the target
wrote and the generator judged (flood), the requests the stop cut before their text was counted
(huge), the Locust process's peak RSS (polled) and how long the run outlasted its -t (run.json's
duration_s), each beside the reference's.
Target: each run outlasts its -t by at most 2 s more than its reference, and its peak RSS stays
under 1 GiB (before the high-water mark the native plane grew 200 MB/s and never stopped).
Run from the repo root: python -m benchmarks.fast_stream
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks._common import ROOT
from tests.servers import flood, scripted

RUN_S, MOST_RSS, MOST_LATER_S = 6, 1 << 30, 2.0
HUGE = 2_000_000  # bytes of the one huge event in each answer


def flooded(plane: str, events: int | None) -> tuple[float, int, int, int]:
    """(seconds the run outlasted -t, peak RSS in bytes, events written, events judged)."""
    with flood.running(events) as server:
        later, peak, lines = run(plane, server.url)
        judged = sum(len(r["gaps"]) + 1 for r in lines if r["ttft"] is not None)
        return later, peak, sum(server.sent), judged


def huge(plane: str, size: int | None) -> tuple[float, int, int]:
    """(seconds the run outlasted -t, peak RSS in bytes, requests cut before their text was counted)."""
    with scripted.running(5, *(("--modes", f"en=huge:{size}") if size else ())) as url:
        later, peak, lines = run(plane, url, "--max-tokens", "6")
        return later, peak, sum(1 for r in lines if r["error"] and "characters were counted" in r["error"])


def run(plane: str, url: str, *extra: str) -> tuple[float, int, list[dict]]:
    """One Locust run at `url`: (seconds it outlasted -t, its peak RSS in bytes, requests.jsonl)."""
    with tempfile.TemporaryDirectory() as results:
        argv = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "--only-summary"]
        argv += ["--host", url, "--results-dir", results, "-u", "1", "-r", "1", "-t", f"{RUN_S}s", "--langs", "en"]
        argv += extra
        env = {**os.environ, "LLMCHAOS_PLANE": plane}
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ps, peak = psutil.Process(proc.pid), 0
        while proc.poll() is None:
            try:
                peak = max(peak, ps.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.1)
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"fast_stream: locust exited with {proc.returncode}: {err[-2000:]}")
        (run_dir,) = [p for p in Path(results).iterdir() if p.is_dir()]
        duration = json.loads((run_dir / "run.json").read_text())["duration_s"]
        lines = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
        return duration - RUN_S, peak, lines


def line(plane: str, what: str, later: float, ref_later: float, peak: int, ref_peak: int) -> bool:
    """Print one run's figures beside its reference's; whether it met the target."""
    met = later - ref_later <= MOST_LATER_S and peak < MOST_RSS
    print(
        f"  {plane:7} {what}  past -t {later:5.2f} s (reference {ref_later:5.2f})"
        f"  peak RSS {peak / 2**20:6.0f} MB (reference {ref_peak / 2**20:4.0f}, {peak / ref_peak:4.1f}x)"
        f"  {'met' if met else 'MISSED'}"
    )
    return met


def main() -> int:
    built = any((ROOT / "loadtests" / "dataplane").glob("_native*.so"))  # read as a file: benchmarks run commands
    planes = ["native", "python"] if built else ["python"]
    ok = True
    print(f"fast_stream: one user, -t {RUN_S}s; flood against the reference (10 events a request)")
    for plane in planes:
        later, peak, sent, judged = flooded(plane, None)
        ref_later, ref_peak, _, _ = flooded(plane, 10)
        ok &= line(plane, f"written {sent:>10,} judged {judged:>10,}", later, ref_later, peak, ref_peak)
    print(f"fast_stream: one user, -t {RUN_S}s; answers of a {HUGE / 1e6:g} MB event against short answers")
    for plane in planes:
        later, peak, cut = huge(plane, HUGE)
        ref_later, ref_peak, _ = huge(plane, None)
        ok &= line(plane, f"cut uncounted at the stop {cut:>3}", later, ref_later, peak, ref_peak)
    print(
        f"fast_stream: target past -t at most {MOST_LATER_S:g} s over its reference, peak RSS under 1 GiB: "
        f"{'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
