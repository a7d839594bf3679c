"""What the reference server's router adds to a stream: TTFT and inter-token latency of the same
engine reached directly and through the router, interleaved under one load.

`llmchaos serve --replicas 2 --router round-robin --pacer-rate 50` with replica 1 taken out of the
router's pool (`PUT /admin/router/pool/1`), so both legs stream from engine 0 at once: STREAMS
concurrent clients, every other request through the router. A request's TTFT through the router
less the direct ones' (p50) is the router's hop (the request relayed, the engine's head and first
event passed back); its ITL p99 over the direct ITL p99 says whether relaying the events unbuffered
bunches or delays them. Targets: the router adds under 2 ms to TTFT p50, and under 1 ms to ITL p99.
Run from the repo root: python -m benchmarks.router_overhead
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time

import httpx

from benchmarks._common import llmchaos, process
from llmchaos.histogram import nearest_rank

TOKEN = "bench-secret"
STREAMS, ROUNDS, TOKENS = 8, 12, 24  # 8 at once, 96 streams per leg; 24 tokens at 50/s: ~0.5 s each
BODY = {"model": "llmchaos-sim-8b", "messages": [{"role": "user", "content": "hello " * 40}], "max_tokens": TOKENS}
SERVER = llmchaos("serve", "--port", "{port}", "--replicas", "2", "--router", "round-robin")
SERVER += ["--pacer-rate", "50", "--admin-token", TOKEN]


async def stream(client: httpx.AsyncClient, url: str) -> tuple[float, list[float]]:
    """(TTFT, inter-event gaps) of one stream."""
    start = time.perf_counter()
    stamps: list[float] = []
    async with client.stream("POST", url + "/v1/chat/completions", json=BODY | {"stream": True}) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                stamps.append(time.perf_counter())
    return stamps[0] - start, [b - a for a, b in itertools.pairwise(stamps)]


async def measure(legs: dict[str, str]) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = {leg: ([], []) for leg in legs}
    names = list(legs)
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None)) as client:
        for _ in range(ROUNDS):
            jobs = [(names[k % len(names)], legs[names[k % len(names)]]) for k in range(STREAMS)]
            results = await asyncio.gather(*(stream(client, url) for _, url in jobs))
            for (leg, _), (ttft, gaps) in zip(jobs, results, strict=True):
                out[leg][0].append(ttft)
                out[leg][1].extend(gaps)
    return out


def main() -> int:
    auth = {"authorization": f"Bearer {TOKEN}"}
    with process(SERVER, cpu=None, health="/healthz") as (router, _):
        engine = httpx.get(router + "/admin/replicas/0", headers=auth).json()["url"]
        httpx.put(router + "/admin/router/pool/1", headers=auth).raise_for_status()
        results = asyncio.run(measure({"direct": engine, "router": router}))
    print(f"{STREAMS} streams at once, {ROUNDS} rounds, {TOKENS} tokens paced at 50/s; half of them through the router")
    print(f"{'leg':7} {'streams':>7} {'ttft p50 ms':>12} {'p99':>8} {'itl p50 ms':>11} {'p99':>8}")
    figures: dict[str, tuple[float, float]] = {}
    for leg, (ttfts, gaps) in results.items():
        figures[leg] = (nearest_rank(ttfts, 50), nearest_rank(gaps, 99))
        print(
            f"{leg:7} {len(ttfts):7} {figures[leg][0] * 1000:12.2f} {nearest_rank(ttfts, 99) * 1000:8.2f} "
            f"{nearest_rank(gaps, 50) * 1000:11.2f} {figures[leg][1] * 1000:8.2f}"
        )
    ttft_added = figures["router"][0] - figures["direct"][0]
    itl_added = figures["router"][1] - figures["direct"][1]
    met = ttft_added < 0.002 and itl_added < 0.001
    print(
        f"the router adds {ttft_added * 1000:.2f} ms to TTFT p50 (target < 2 ms) and {itl_added * 1000:.2f} ms "
        f"to ITL p99 (target < 1 ms): {'met' if met else 'NOT met'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
