"""The yardstick of the generator-capacity benchmark: a plain asyncio + aiohttp client, `streams`
loops each sending one streaming chat request after another (mixed languages, an x-request-id
each) and timing each content line when it has read it."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid

import aiohttp

from benchmarks._measured import Measured

CONTENT = b'"delta":{"content"'


async def _loop(session: aiohttp.ClientSession, url: str, lang: str, stop: float, out: dict[str, Measured]) -> None:
    body = {"model": "m", "stream": True, "max_tokens": 60, "messages": [{"role": "user", "content": "Hi"}]}
    while time.time() < stop:
        rid = uuid.uuid4().hex
        start_unix, start = time.time(), time.perf_counter()
        times: list[float] = []
        headers = {"x-request-id": rid, "x-llmchaos-lang": lang}
        async with session.post(url + "/v1/chat/completions", json=body, headers=headers) as resp:
            async for line in resp.content:
                if CONTENT in line:
                    times.append(time.perf_counter())
        if times:
            out[rid] = Measured.of(start_unix, start, times)


def run(url: str, streams: int, langs: list[str], seconds: float) -> dict[str, Measured]:
    """Every request measured over `seconds`, by its x-request-id."""
    out: dict[str, Measured] = {}

    async def main() -> None:
        stop = time.time() + seconds
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
            lang = itertools.cycle(langs)
            await asyncio.gather(*(_loop(s, url, next(lang), stop, out) for _ in range(streams)))

    asyncio.run(main())
    return out
