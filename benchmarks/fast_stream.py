"""The generator against a target that streams faster than it can judge (issue 34, item 1): one
user, one language, `-t RUN_S`, against tests/servers/flood.py (one-character content events written
as fast as the socket takes them), on each data plane.

Reference: the same run against the same server answering 10 events a request, in the same
process. Printed per plane: the events the target wrote and the generator judged, the Locust
process's peak RSS (polled) and how long the run outlasted its -t (run.json's duration_s), each
beside the reference's.
Target: the flood run outlasts its -t by at most 2 s more than the reference, and its peak RSS stays
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
from tests.servers import flood

RUN_S, MOST_RSS, MOST_LATER_S = 6, 1 << 30, 2.0


def run(plane: str, events: int | None) -> tuple[float, int, int, int]:
    """(seconds the run outlasted -t, peak RSS in bytes, events written, events judged)."""
    with flood.running(events) as server, tempfile.TemporaryDirectory() as results:
        argv = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "--only-summary"]
        argv += [
            "--host",
            server.url,
            "--results-dir",
            results,
            "-u",
            "1",
            "-r",
            "1",
            "-t",
            f"{RUN_S}s",
            "--langs",
            "en",
        ]
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
        judged = sum(len(r["gaps"]) + 1 for r in lines if r["ttft"] is not None)
        return duration - RUN_S, peak, sum(server.sent), judged


def main() -> int:
    built = any((ROOT / "loadtests" / "dataplane").glob("_native*.so"))  # read as a file: benchmarks run commands
    planes = ["native", "python"] if built else ["python"]
    ok = True
    print(f"fast_stream: one user, -t {RUN_S}s; flood against the reference (10 events a request)")
    for plane in planes:
        later, peak, sent, judged = run(plane, None)
        ref_later, ref_peak, _, _ = run(plane, 10)
        met = later - ref_later <= MOST_LATER_S and peak < MOST_RSS
        ok &= met
        print(
            f"  {plane:7} written {sent:>10,} judged {judged:>10,}  past -t {later:5.2f} s (reference {ref_later:5.2f})"
            f"  peak RSS {peak / 2**20:6.0f} MB (reference {ref_peak / 2**20:4.0f}, {peak / ref_peak:4.1f}x)"
            f"  {'met' if met else 'MISSED'}"
        )
    print(
        f"fast_stream: target past -t at most {MOST_LATER_S:g} s over the reference, peak RSS under 1 GiB: "
        f"{'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
