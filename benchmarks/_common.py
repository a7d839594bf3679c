"""Shared pieces of the benchmarks: a server process pinned to one core and a raw SSE load client."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import httpx
import psutil

from llmchaos import tokenizer
from llmchaos.procs import free_port, stop

ROOT = Path(__file__).resolve().parent.parent  # the repo root: the cwd of every process a benchmark starts


def llmchaos(*args: str) -> list[str]:
    """The command that runs `llmchaos ARGS` (a component, started by its command)."""
    return [sys.executable, "-m", "llmchaos.cli", *args]


def module(name: str, *args: str) -> list[str]:
    """The command that runs `benchmarks.<name>` (a helper of the benchmarks) with `args`."""
    return [sys.executable, "-m", f"benchmarks.{name}", *args]


def server(name: str, *args: str) -> list[str]:
    """The command that runs the ground-truth server `tests.servers.<name>` (shared with the tests)."""
    return [sys.executable, "-m", f"tests.servers.{name}", *args]


@contextlib.contextmanager
def process(argv: list[str], cpu: int | None, health: str) -> Iterator[tuple[str, psutil.Process]]:
    """Start `argv` (in the repo root) with {port} filled in, pinned to `cpu`; wait for `health` to answer 200."""
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in argv]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ps = psutil.Process(proc.pid)
        if cpu is not None:
            ps.cpu_affinity([cpu])
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + health, timeout=5).status_code == 200:
                    break
            time.sleep(0.05)
        yield url, ps
    finally:
        stop(proc)


def total(url: str, name: str) -> float:
    """The server's metric `name` (a sample's full name, e.g. vllm:prompt_tokens_total) summed over its labels."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.split("{", 1)[0] == name)


def template(url: str) -> int:
    """The server's tokens beyond the prompt's own (our tokenizer's count) in one chat request (its chat template)."""
    text = " The quick brown fox jumps over the lazy dog." * 10
    body = {"model": "llmchaos-sim-8b", "messages": [{"role": "user", "content": text}], "max_tokens": 1}
    usage = httpx.post(url + "/v1/chat/completions", json=body, timeout=60).json()["usage"]
    return int(usage["prompt_tokens"]) - tokenizer.count(text)


@dataclass
class Counts:
    events: int = 0
    bytes: int = 0
    open: int = 0
    errors: list[str] = field(default_factory=list)


class _Stream(asyncio.Protocol):
    """One streaming request on a raw connection: counts `data:` events, nothing else."""

    def __init__(self, request: bytes, counts: Counts, done: asyncio.Future[None]) -> None:
        self.request, self.counts, self.done, self.tail = request, counts, done, b""
        self.started = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.counts.open += 1
        cast(asyncio.Transport, transport).write(self.request)  # a stream connection's transport is a Transport

    def data_received(self, data: bytes) -> None:
        if not self.started and not data.startswith(b"HTTP/1.1 200"):
            self.counts.errors.append(data[:300].decode(errors="replace"))
        self.started = True
        buf = self.tail + data
        self.counts.events += buf.count(b"data: ")
        self.counts.bytes += len(data)
        self.tail = buf[-5:]
        self.counts.events -= self.tail.count(b"data: ")  # counted again next time

    def connection_lost(self, exc: Exception | None) -> None:
        self.counts.open -= 1
        if not self.done.done():
            self.done.set_result(None)


def chat_request(port: int, max_tokens: int, lang: str = "en", path: str = "/v1/chat/completions") -> bytes:
    body = json.dumps(
        {
            "model": "llmchaos-sim-8b",
            "stream": True,
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": "Tell me a story."}],
        }
    )
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"x-llmchaos-lang: {lang}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n{body}"
    ).encode()


async def open_streams(url: str, n: int, request: bytes, counts: Counts) -> list[asyncio.Future[None]]:
    loop = asyncio.get_running_loop()
    port = int(url.rsplit(":", 1)[1])
    futures: list[asyncio.Future[None]] = []
    for _ in range(n):
        fut: asyncio.Future[None] = loop.create_future()
        await loop.create_connection(functools.partial(_Stream, request, counts, fut), "127.0.0.1", port)
        futures.append(fut)
    return futures


async def measure(counts: Counts, seconds: float, server: psutil.Process) -> tuple[float, float]:
    """Events/s received and the server's CPU share (1.0 = one core) over `seconds`."""
    server.cpu_percent(None)
    start_events, start = counts.events, time.perf_counter()
    await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - start
    return (counts.events - start_events) / elapsed, server.cpu_percent(None) / 100.0
