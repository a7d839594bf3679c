"""Resident memory of the reference server with 2,000 concurrent open streams.

Reference: the same server's RSS when idle after start-up, in the same run.
Target: 2,000 open streams in under 1 GiB.
Run from the repo root: python -m benchmarks.server_memory
"""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import psutil

from benchmarks._common import Counts, chat_request, llmchaos, open_streams, process

STREAMS, TARGET_BYTES = 2000, 1 << 30
SERVE = llmchaos(
    "serve",
    "--port",
    "{port}",
    "--max-num-seqs",
    "2048",
    "--num-blocks",
    "65536",
    "--max-waiting",
    "4096",
    "--sim-time-scale",
    "5",
)  # slow steps: memory, not CPU, is measured


def running(url: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith("vllm:num_requests_running{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def run(url: str, server: psutil.Process) -> tuple[int, int, float]:
    idle = server.memory_info().rss
    counts = Counts()
    port = int(url.rsplit(":", 1)[1])
    await open_streams(url, STREAMS, chat_request(port, max_tokens=4000), counts)
    deadline = time.monotonic() + 60
    while running(url) < STREAMS and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    await asyncio.sleep(2.0)  # let every stream deliver tokens
    return idle, server.memory_info().rss, running(url)


def main() -> int:
    psutil.Process().cpu_affinity([1])
    with process(SERVE, cpu=0, health="/healthz") as (url, ps):
        idle, loaded, n = asyncio.run(run(url, ps))
    mib = 1 << 20
    print(f"idle RSS (reference)          {idle / mib:8.1f} MiB")
    print(
        f"RSS with {n:.0f} running streams  {loaded / mib:8.1f} MiB "
        f"({(loaded - idle) / max(n, 1) / 1024:.1f} KiB per stream, {loaded / idle:.2f}x idle)"
    )
    ok = n >= STREAMS and loaded < TARGET_BYTES
    print(f"target {STREAMS} streams under 1 GiB: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
