"""SSE events/s and timestamp lag p99 of one Locust worker process on one core, beside a plain
asyncio aiohttp client reading the same source in the same run.

The source (`python -m tests.servers.paced`) is pinned to CPU 0 and stamps every event with its
send time; each client runs alone on CPU 1. Lag = receive time - send time, per event.
Target: at least the aiohttp client's rate, with lag p99 under 2 ms.
Run from the repo root: python -m benchmarks.client_throughput
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from benchmarks._common import ROOT, process, server
from llmchaos import run
from llmchaos.histogram import nearest_rank

EVENTS, GAP, SECONDS, WARMUP = 200, 0.02, 12, 3
SCENARIOS = {"saturating": 400, "moderate": 100}  # streams: 20,000 and 5,000 events/s offered
SOURCE = server("paced", "{port}", str(EVENTS), str(GAP))
# One Locust process running the project's locustfile, by its command (cwd: the repo root).
LOCUST = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "--only-summary"]
Figures = dict[str, float]  # events_s, lag_p50, lag_p99 (seconds), cpu (1.0 = one core)


def pct(values: list[float], p: float) -> float:
    return nearest_rank(values, p) if values else float("nan")


def aiohttp_client(url: str, streams: int, stagger: bool = False) -> Figures:
    """With `stagger`, each stream starts at a random point of the first gap, so that events arrive
    spread out rather than in one burst per gap."""
    import random

    import aiohttp

    lags: list[float] = []
    count = [0]

    async def one(session: aiohttp.ClientSession, stop: float, start_counting: float) -> None:
        if stagger:
            await asyncio.sleep(random.uniform(0.0, GAP))
        while time.time() < stop:
            async with session.post(url + "/v1/chat/completions", json={"stream": True}) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: {") and b"x_sent_ns" in line:
                        now = time.time_ns()
                        sent = json.loads(line[6:])["x_sent_ns"]
                        if now / 1e9 >= start_counting:
                            lags.append((now - sent) / 1e9)
                            count[0] += 1

    async def main() -> float:
        t0 = time.time()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
            await asyncio.gather(*(one(s, t0 + SECONDS, t0 + WARMUP) for _ in range(streams)))
        return time.time() - t0 - WARMUP

    before, t0 = psutil.Process().cpu_times(), time.monotonic()
    elapsed = asyncio.run(main())
    after = psutil.Process().cpu_times()
    cpu = (after.user + after.system - before.user - before.system) / (time.monotonic() - t0)
    return {"events_s": count[0] / elapsed, "lag_p50": pct(lags, 50), "lag_p99": pct(lags, 99), "cpu": cpu}


def locust_worker(url: str, streams: int) -> Figures:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [
                *LOCUST,
                "--host",
                url,
                "--results-dir",
                tmp,
                "-u",
                str(streams),
                "-r",
                str(streams),
                "-t",
                f"{SECONDS}s",
                "--warmup",
                f"{WARMUP}s",
                "--langs",
                "en",
                "--max-tokens",
                str(EVENTS),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, {1}),
        )
        ps = psutil.Process(proc.pid)
        time.sleep(WARMUP + 1)
        ps.cpu_percent(None)
        time.sleep(SECONDS - WARMUP - 2)
        cpu = ps.cpu_percent(None) / 100
        proc.wait(120)
        sent = httpx.get(url + "/sent", timeout=30).json()
        (run_dir,) = [p for p in Path(tmp).iterdir() if p.is_dir()]  # one <run_id>/ per run
        requests = list(run.load(run_dir).requests())
    start = min(r.intended for r in requests)
    window = (start + WARMUP, start + SECONDS - 0.5)  # the same window the aiohttp client counts
    lags: list[float] = []
    events = 0
    for r in requests:
        if r.ttft is None or r.request_id not in sent:
            continue
        t = r.intended + r.ttft
        received = [t]
        for g in r.gaps:
            t += g
            received.append(t)
        # not strict: the source may have sent events the run stopped before receiving
        for got, ns in zip(received, sent[r.request_id], strict=False):
            if window[0] <= got < window[1]:
                lags.append(got - ns / 1e9)
                events += 1
    return {
        "events_s": events / (window[1] - window[0]),
        "lag_p50": pct(lags, 50),
        "lag_p99": pct(lags, 99),
        "cpu": cpu,
    }


def main() -> int:
    ok = True
    for scenario, streams in SCENARIOS.items():
        with process(SOURCE, cpu=0, health="/healthz") as (url, _):
            ref = run_pinned(aiohttp_client, url, streams)
        with process(SOURCE, cpu=0, health="/healthz") as (url, _):
            ours = locust_worker(url, streams)
        print(
            f"{scenario}: {streams} streams, an event every {GAP * 1000:g} ms each "
            f"({streams / GAP:.0f} events/s offered)"
        )
        print(f"  {'client':30} {'events/s':>9} {'lag p50 ms':>11} {'lag p99 ms':>11} {'cpu':>5}")
        for name, r in (("aiohttp (asyncio, reference)", ref), ("locust worker (llmchaos)", ours)):
            print(
                f"  {name:30} {r['events_s']:9.0f} {r['lag_p50'] * 1000:11.2f} {r['lag_p99'] * 1000:11.2f} "
                f"{r['cpu']:5.2f}"
            )
        ratio = ours["events_s"] / ref["events_s"]
        met = ratio >= 0.98 if scenario == "saturating" else ours["lag_p99"] < 0.002
        ok &= met
        print(
            f"  rate ratio {ratio:.2f}; target ({'>= aiohttp' if scenario == 'saturating' else 'lag p99 < 2 ms'}): "
            f"{'met' if met else 'NOT met'}"
        )
    return 0 if ok else 1


def run_pinned(fn: Callable[..., Figures], url: str, streams: int, **kw: object) -> Figures:
    """Run `fn` in this process pinned to CPU 1, then restore the affinity."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {1})
    try:
        return fn(url, streams, **kw)
    finally:
        os.sched_setaffinity(0, before)


if __name__ == "__main__":
    sys.exit(main())
