"""Slowloris against a real `llmchaos serve`: request heads that trickle in over real sockets are
cut off at `--header-timeout`, while ordinary requests on other connections keep being served.

Scaled down from the report (300 connections, one header byte a second, a 10 s timeout) to 50
connections, a byte every 0.1 s and a 1 s timeout. A connection must close after the timeout and
before the timeout's margin plus the machine's worst wake-up delay in that test (tests/noise.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.noise import WakeNoise
from tests.procs import Server, serve

pytestmark = pytest.mark.timing

TIMEOUT_S = 1.0
HEADER_BYTES = 8192
MODEL = "llmchaos-sim-8b"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serve(
        "--sim-time-scale", "0.2", "--header-timeout", str(TIMEOUT_S), "--max-header-bytes", str(HEADER_BYTES)
    ) as s:
        yield s


async def trickle(url: str, head: bytes, every_s: float, give_up_s: float) -> tuple[float, bytes]:
    """Open a connection, send `head`, then one more header byte every `every_s` until the server
    closes it: (seconds from connect to close, what the server sent). Gives up after `give_up_s`."""
    u = urlsplit(url)
    t0 = time.monotonic()
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    got = b""
    try:
        writer.write(head)
        while time.monotonic() - t0 < give_up_s:
            try:
                chunk = await asyncio.wait_for(reader.read(4096), every_s)
            except TimeoutError:
                writer.write(b"x")
                continue
            except ConnectionResetError:  # closed while a byte of ours was unread: a reset, not a FIN
                chunk = b""
            if not chunk:
                return time.monotonic() - t0, got
            got += chunk
        return float("inf"), got
    finally:
        writer.close()


async def ordinary(url: str, until: asyncio.Event) -> list[int]:
    """Completions one after another on a normal client until `until` is set: their statuses."""
    statuses = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        while not until.is_set():
            body = {"model": MODEL, "prompt": "Hello", "max_tokens": 5, "ignore_eos": True}
            statuses.append((await c.post("/v1/completions", json=body)).status_code)
    return statuses


def test_trickling_heads_are_closed_and_others_are_served(server: Server) -> None:
    async def go() -> tuple[list[tuple[float, bytes]], list[int]]:
        stop = asyncio.Event()
        served = asyncio.create_task(ordinary(server.url, stop))
        head = b"GET /healthz HTTP/1.1\r\nhost: test\r\nx-slow: "
        slow = await asyncio.gather(*(trickle(server.url, head, 0.1, 6 * TIMEOUT_S) for _ in range(50)))
        stop.set()
        return slow, await served

    with WakeNoise() as noise:
        slow, statuses = asyncio.run(go())
    took = sorted(t for t, _ in slow)
    assert took[-1] < 3 * TIMEOUT_S + noise.worst, f"trickling connections still open: {took[-5:]}"
    assert took[0] >= TIMEOUT_S * 0.9, took[:5]
    assert all(got.startswith(b"HTTP/1.1 408 ") for _, got in slow), {got[:40] for _, got in slow}
    assert len(statuses) >= 5, statuses
    assert set(statuses) == {200}, statuses


def test_a_connection_that_sends_nothing_is_closed(server: Server) -> None:
    with WakeNoise() as noise:
        took, got = asyncio.run(trickle(server.url, b"", 10 * TIMEOUT_S, 6 * TIMEOUT_S))  # never a byte
    assert TIMEOUT_S * 0.9 <= took < 3 * TIMEOUT_S + noise.worst, took
    assert got == b"", got  # closed like an idle keep-alive connection: no response to no request


def test_an_oversized_head_is_431(server: Server) -> None:
    async def go() -> tuple[float, bytes]:
        head = b"GET /healthz HTTP/1.1\r\nhost: test\r\nx-big: " + b"a" * (2 * HEADER_BYTES)
        return await trickle(server.url, head, 0.1, 6 * TIMEOUT_S)

    with WakeNoise() as noise:
        took, got = asyncio.run(go())
    assert got.startswith(b"HTTP/1.1 431 "), got
    assert took < TIMEOUT_S + noise.worst, took  # refused by its size, not by the timeout
    assert httpx.get(server.url + "/healthz").status_code == 200


def test_a_slow_head_within_the_timeout_is_served_and_the_next_one_is_timed_too(server: Server) -> None:
    """The timer covers each request's head on a kept-alive connection, not only the first."""
    u = urlsplit(server.url)
    head = b"GET /healthz HTTP/1.1\r\nhost: test\r\n\r\n"

    async def go() -> tuple[bytes, float, bytes]:
        reader, writer = await asyncio.open_connection(u.hostname, u.port)
        try:
            for i in range(0, len(head), 8):  # the whole head over ~0.4 s: within the timeout
                writer.write(head[i : i + 8])
                await asyncio.sleep(0.08)
            first = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(v) for k, _, v in (h.partition(b": ") for h in first.split(b"\r\n")) if k == b"content-length"
            )
            await reader.readexactly(length)
            writer.write(b"GET /healthz HTTP/1.1\r\nhost: test\r\nx-slow: ")  # then stalls
            t0 = time.monotonic()
            rest = await asyncio.wait_for(reader.read(), 6 * TIMEOUT_S)  # to EOF
            return first, time.monotonic() - t0, rest
        finally:
            writer.close()

    with WakeNoise() as noise:
        first, took, rest = asyncio.run(go())
    assert first.startswith(b"HTTP/1.1 200 "), first
    assert rest.startswith(b"HTTP/1.1 408 "), rest
    assert TIMEOUT_S * 0.9 <= took < 3 * TIMEOUT_S + noise.worst, took
