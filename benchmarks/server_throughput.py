"""SSE events per second the reference server sustains on one core (sim executor, zero cost).

The server is pinned to CPU 0, the raw asyncio load client to CPU 1. The same client
reads a bare Starlette SSE endpoint on the same stack as the reference (framework
ceiling), so the ratio is stable on a noisy machine. Target: >= 15,000 events/s.
Run from the repo root: python -m benchmarks.server_throughput
"""

from __future__ import annotations

import asyncio
import sys

import psutil

from benchmarks._common import Counts, chat_request, llmchaos, measure, open_streams, process, server

STREAMS, SECONDS, TARGET = 64, 5.0, 15_000
SERVE = llmchaos(
    "serve",
    "--port",
    "{port}",
    "--sim-time-scale",
    "0",
    "--sim-jitter",
    "0",
    "--max-num-seqs",
    "256",
    "--max-num-batched-tokens",
    "8192",
)
BARE = server("bare", "{port}")


async def run(url: str, server: psutil.Process) -> tuple[float, float]:
    counts = Counts()
    port = int(url.rsplit(":", 1)[1])
    await open_streams(url, STREAMS, chat_request(port, max_tokens=8000), counts)
    await asyncio.sleep(1.0)  # warm up
    rate, cpu = await measure(counts, SECONDS, server)
    if counts.errors:
        raise SystemExit(f"stream errors: {counts.errors[:3]}")
    return rate, cpu


def main() -> int:
    psutil.Process().cpu_affinity([1])
    results: dict[str, tuple[float, float]] = {}
    for name, argv in (("bare starlette sse (reference)", BARE), ("llmchaos serve, sim cost 0", SERVE)):
        with process(argv, cpu=0, health="/healthz") as (url, ps):
            results[name] = asyncio.run(run(url, ps))
    print(f"{'server':34} {'events/s':>10} {'server cpu':>10}")
    for name, (rate, cpu) in results.items():
        print(f"{name:34} {rate:10.0f} {cpu:10.2f}")
    ours = results["llmchaos serve, sim cost 0"][0]
    ratio = ours / results["bare starlette sse (reference)"][0]
    print(
        f"ratio to the bare stack: {ratio:.2f}; target {TARGET} events/s on one core: "
        f"{'met' if ours >= TARGET else 'NOT met'}"
    )
    return 0 if ours >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
