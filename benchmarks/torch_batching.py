"""Output tokens/s of the torch executor with continuous batching, and the clock-lock effect.

The same 64 requests (64 output tokens each, prompts in four languages) are served one at a time
(concurrency 1) and with 8 and 32 in flight; then, at concurrency 8, with the SM clock locked low:
on the CPU through the simulated device's admin API, on a GPU by whatever locks it (see
benchmarks/gpu_check.sh, which locks it through the gpu_clock fault and NVML). Target: at least
4x the one-at-a-time tokens/s at concurrency 32.
Run from the repo root: python -m benchmarks.torch_batching [--device cuda --model small]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import httpx

from benchmarks._common import llmchaos, process

TARGET = 4.0
TOKEN = "bench"
LANGS = ("en", "de", "zh", "ja")
PROMPT = "Tell me a story about a lighthouse keeper and the ships that pass by at night. "  # 28 tokens


async def tokens_per_s(url: str, concurrency: int, requests: int, max_tokens: int, repeat: int = 2) -> float:
    """Output tokens/s over `requests` requests with `concurrency` in flight; prompts of `repeat`
    times PROMPT (long ones make the steps prefill, compute-bound on a GPU)."""
    gate = asyncio.Semaphore(concurrency)
    body = {"model": "llmchaos-sim-8b", "max_tokens": max_tokens, "ignore_eos": True, "temperature": 1.0}

    async def one(c: httpx.AsyncClient, i: int) -> int:
        async with gate:
            r = await c.post(
                "/v1/completions",
                json={**body, "prompt": f"{i}. {PROMPT * repeat}", "seed": i},  # no two share a prefix
                headers={"x-llmchaos-lang": LANGS[i % len(LANGS)]},
            )
            r.raise_for_status()
            return int(r.json()["usage"]["completion_tokens"])

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as c:
        await one(c, -1)  # warm: the first request of a connection pays for more than its tokens
        start = time.perf_counter()
        made = sum(await asyncio.gather(*(one(c, i) for i in range(requests))))
        return made / (time.perf_counter() - start)


def lock(url: str, mhz: float | None) -> None:
    """Lock (or with None reset) the simulated device's clock through the admin API."""
    headers = {"authorization": f"Bearer {TOKEN}"}
    r = (
        httpx.delete(url + "/admin/device/clocks", headers=headers)
        if mhz is None
        else httpx.put(url + "/admin/device/clocks", headers=headers, json={"graphics_mhz": mhz})
    )
    r.raise_for_status()


def measure(url: str, args: argparse.Namespace) -> dict[str, float]:
    def rate(concurrency: int) -> float:
        return asyncio.run(tokens_per_s(url, concurrency, args.requests, args.max_tokens, args.prompt_repeat))

    out = {f"c{c}": rate(c) for c in args.concurrency}
    if args.lock_mhz:
        lock(url, args.lock_mhz)
        try:
            out["c8_locked"] = rate(8)
        finally:
            lock(url, None)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="tiny")
    p.add_argument("--url", help="measure a server already running here instead of starting one")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompt-repeat", type=int, default=2, help="prompts of this many 28-token sentences")
    p.add_argument("--lock-mhz", type=float, default=990.0, help="admin-API clock for the locked run (0: none)")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    if args.url:
        figures = measure(args.url, args)
    else:
        engine = ("--engine", "torch", "--device", args.device, "--model", args.model)
        serve = llmchaos("serve", "--port", "{port}", *engine, "--admin-token", TOKEN)
        with process(serve, cpu=0 if args.device == "cpu" else None, health="/healthz") as (url, _):
            figures = measure(url, args)
    one = figures.get("c1")
    print(f"torch executor, {args.model} on {args.device}: {args.requests} requests x {args.max_tokens} output tokens")
    print(f"{'run':28} {'tokens/s':>10} {'x one at a time':>16}")
    for name, rate in figures.items():
        label = f"concurrency {name[1:]}" if name[1:].isdigit() else f"concurrency 8, {args.lock_mhz:g} MHz lock"
        print(f"{label:28} {rate:10.1f} {rate / one if one else float('nan'):16.2f}")
    if "c8_locked" in figures:
        drop = figures["c8"] / figures["c8_locked"]
        print(
            f"clock lock: {drop:.2f}x fewer tokens/s at {args.lock_mhz:g} MHz (clock ratio {1980 / args.lock_mhz:.2f}x)"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f)
    if one is None or "c32" not in figures:
        return 0
    speedup = figures["c32"] / one
    print(f"target: >= {TARGET:g}x at concurrency 32: {'met' if speedup >= TARGET else 'NOT met'} ({speedup:.1f}x)")
    return 0 if speedup >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
