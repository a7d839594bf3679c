"""Replay schedule fidelity of one Locust worker process on one core (`locust -f loadtests/replay/locustfile.py`)
against a zero-cost reference server (`llmchaos serve --sim-time-scale 0`) on the other.

Logs of our JSONL format with Poisson arrivals at a steady recorded rate; each replayed request is
timed by its intended send (the log's offset, sped up) and its actual send. Three scenarios:
200/s and 1,000/s for 20 s, and a 1-million-line log (1,000 s recorded at 1,000/s) streamed at
--speed 20 keeping 5 % of its users (about 1,000 requests/s sent while 20,000 lines/s are read),
the worker's RSS sampled every 0.5 s. And --mirror at 200/s to two ground-truth servers
(`tests.servers.truth`, which note each request's arrival on the machine's monotonic clock):
how far apart the two copies of a request arrive. Up to 1,000 requests in flight at 200/s and 1,000/s, so
that a server slowed by a busy machine does not hold the schedule back; the default 100 while
streaming the big log (the memory of a burst of requests in flight stays with the process: flat
is about the log). The CPU columns are of one core, the worker's and the server's.
Targets: lag p99 under 2 ms at 200/s; the achieved rate within 1 % of the recorded rate (both
rates); RSS flat while streaming the 1-million-line log (it grows less than 16 MiB from the end of
the run's first quarter to its last second, where holding the log would take hundreds); mirrored
copies arriving within 1 ms of each other (p95).
Run from the repo root: python -m benchmarks.replay_fidelity
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from benchmarks._common import ROOT, llmchaos, process, server
from llmchaos import run

SERVE = llmchaos("serve", "--port", "{port}", "--sim-time-scale", "0")  # zero-cost: answers at once
TRUTH = server("truth", "{port}")  # notes when each request arrived (CLOCK_MONOTONIC, machine-wide)
REPLAY = [sys.executable, "-m", "locust", "-f", "loadtests/replay/locustfile.py", "--headless", "--only-summary"]
LANGS = ("en", "zh", "ja", "de")
MIB = 1 << 20
FLAT_MIB = 16


@dataclass(frozen=True)
class Scenario:
    name: str
    rate: float  # recorded requests/s
    lines: int
    user_ids: int  # distinct users in the log
    speed: float = 1.0
    sample: float = 1.0
    lag_target: float | None = None  # seconds, p99
    # Users (most requests in flight): enough that a server slowed by a busy machine does not hold
    # the schedule back; the memory scenario keeps the default, as memory follows the peak in flight.
    concurrency: int = 1000
    mirror_target: float | None = None  # --mirror to two truth servers; seconds between a pair's arrivals, p95


SCENARIOS = (
    Scenario("200/s", 200, 4_000, 2_000, lag_target=0.002),
    Scenario("1,000/s", 1_000, 20_000, 10_000),
    Scenario("1M-line log", 1_000, 1_000_000, 50_000, speed=20, sample=0.05, concurrency=100),
    Scenario("mirror 200/s", 200, 2_000, 1_000, mirror_target=0.001),
)


def write_log(path: Path, s: Scenario, seed: int = 7) -> None:
    """`s.lines` requests at Poisson arrivals of `s.rate`/s, users and languages drawn at random."""
    rng = random.Random(seed)
    t = 0.0
    with open(path, "w") as f:
        for _ in range(s.lines):
            u = rng.randrange(s.user_ids)
            f.write(
                f'{{"ts":{t:.6f},"user_id":"u{u}","lang":"{LANGS[u % len(LANGS)]}",'
                '"input_tokens":32,"output_tokens":1}\n'
            )
            t += rng.expovariate(s.rate)


def replay(urls: list[str], server: psutil.Process, s: Scenario, tmp: Path) -> dict[str, float]:
    log = tmp / "log.jsonl"
    write_log(log, s)
    argv = [*REPLAY, "--log", str(log), "--target-a", urls[0], "--speed", str(s.speed), "--sample", str(s.sample)]
    if len(urls) == 2:
        argv += ["--target-b", urls[1], "--mirror"]
    argv += ["--max-concurrency", str(s.concurrency)]
    proc = subprocess.Popen(
        [*argv, "--results-dir", str(tmp / "r")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.sched_setaffinity(0, {1}),
    )
    ps, rss, cpu, began = psutil.Process(proc.pid), [], 0.0, time.monotonic()
    server_before = server.cpu_times()
    while proc.poll() is None:
        try:
            rss.append(ps.memory_info().rss)
            times = ps.cpu_times()
        except psutil.NoSuchProcess:
            break
        cpu = (times.user + times.system) / (time.monotonic() - began)
        time.sleep(0.5)
    server_after, elapsed = server.cpu_times(), time.monotonic() - began
    _, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"replay exited {proc.returncode}: {err.decode()[-2000:]}")
    (run_dir,) = [p for p in (tmp / "r").iterdir() if p.is_dir()]
    side = run.load(run_dir / "a")
    lag = side.run.replay.fidelity.lag if side.run.replay else None
    sent = sorted(r.sent for r in side.requests() if r.outcome == "ok")
    intended = sorted(r.intended for r in side.requests())
    q = len(rss) // 4
    streaming = rss[q:-2]  # from the end of the first quarter, without the last second (the report)
    return {
        "requests": len(intended),
        "ok": len(sent),
        "recorded_rate": (len(intended) - 1) / (intended[-1] - intended[0]),
        "achieved_rate": (len(sent) - 1) / (sent[-1] - sent[0]),
        "lag_p50": lag.p50 if lag and lag.p50 is not None else float("nan"),
        "lag_p99": lag.p99 if lag and lag.p99 is not None else float("nan"),
        "rss_growth": max(streaming) - rss[q] if streaming else float("nan"),
        "rss_max": max(rss, default=0),
        "cpu": cpu,
        "server_cpu": (sum(server_after[:2]) - sum(server_before[:2])) / elapsed,
        "mirror_p50": float("nan"),
        "mirror_p95": float("nan"),
    }


def mirrored(s: Scenario, tmp: Path) -> dict[str, float]:
    """The scenario replayed to two truth servers on CPU 0, and how far apart each pair arrived."""
    with process(TRUTH, 0, "/healthz") as (a, server), process(TRUTH, 0, "/healthz") as (b, _):
        r = replay([a, b], server, s, tmp)
        arrived = [httpx.get(url + "/truth", timeout=60).json()["requests"] for url in (a, b)]
    gaps = sorted(abs(arrived[0][rid]["arrived_ns"] - arrived[1][rid]["arrived_ns"]) / 1e9 for rid in arrived[0])
    return r | {"mirror_p50": gaps[len(gaps) // 2], "mirror_p95": gaps[int(0.95 * len(gaps))]}


def main() -> int:
    ok = True
    print(f"{'scenario':14} {'requests':>9} {'recorded/s':>11} {'achieved/s':>11} {'error':>7} "
          f"{'lag p50 ms':>11} {'lag p99 ms':>11} {'RSS max':>8} {'growth':>8} {'cpu':>5} {'server':>6} "
          f"{'pair p50 ms':>11} {'pair p95 ms':>11}")  # fmt: skip
    for s in SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp:
            if s.mirror_target is not None:
                r = mirrored(s, Path(tmp))
            else:
                with process(SERVE, 0, "/healthz") as (url, server):
                    r = replay([url], server, s, Path(tmp))
        error = abs(r["achieved_rate"] / r["recorded_rate"] - 1)
        met = r["ok"] == r["requests"] and error < 0.01
        if s.lag_target is not None:
            met &= r["lag_p99"] < s.lag_target
        if s.lines >= 1_000_000:
            met &= r["rss_growth"] < FLAT_MIB * MIB
        if s.mirror_target is not None:
            met &= r["mirror_p95"] < s.mirror_target
        ok &= met
        print(
            f"{s.name:14} {r['requests']:9.0f} {r['recorded_rate']:11.1f} {r['achieved_rate']:11.1f} "
            f"{error * 100:6.2f}% {r['lag_p50'] * 1000:11.2f} {r['lag_p99'] * 1000:11.2f} "
            f"{r['rss_max'] / MIB:7.0f}M {r['rss_growth'] / MIB:7.1f}M {r['cpu']:5.2f} {r['server_cpu']:6.2f} "
            f"{r['mirror_p50'] * 1000:11.3f} {r['mirror_p95'] * 1000:11.3f}  {'met' if met else 'NOT met'}"
        )
    print(
        f"targets: lag p99 < 2 ms at 200/s; rate within 1 %; RSS growth < {FLAT_MIB} MiB over the 1M-line log; "
        "mirrored pairs arrive within 1 ms (p95)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
