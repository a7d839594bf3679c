"""The reference server behind the SSE proxy under a hostile mix, beside the same normal load alone.

Normal traffic: streaming chat requests through the proxy at a fixed rate (open loop), each
timed to its first content event and checked to end with [DONE]. Blocks of it alone alternate
with blocks where a hostile mix, from a process of its own, hits both processes: poison
temperatures, 10 MB bodies, slowloris connections (a header byte a second, to the server and to
the proxy), pipelined requests, and clients that disconnect mid-stream. Alternating blocks keep
the machine's drift out of the comparison. Server and proxy memory is sampled throughout.

Targets: the normal streams' TTFT p99 in the hostile blocks within 1.5x of the blocks alone, no
normal stream failed, and memory flat: each process's lowest RSS in the last hostile block within
max(1.2x, +32 MiB) of its lowest in the first. The lowest, so a 10 MB body in flight is no growth;
32 MiB, because glibc keeps freed large buffers in the heap once its mmap threshold has risen (two
bodies' worth at most), while a leak of the bodies grows by 10 MB each (12 per run).
Run from the repo root: python -m benchmarks.hostile_soak
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field

import psutil

from benchmarks._common import ROOT, llmchaos, module, process
from llmchaos.histogram import nearest_rank

RATE, WARMUP, BLOCK, PAIRS = 12.0, 4.0, 6.0, 4  # normal requests/s; seconds; (alone, hostile) pairs
SLOWLORIS = 100  # connections per target, each sending one header byte a second
MIB = 1 << 20
CONTENT = re.compile(rb'^data: \{.*"content":"[^"]')  # a delta with text (the role chunk has none)
SERVE = llmchaos("serve", "--port", "{port}", "--header-timeout", "3")  # the calibrated sim, slowloris cut at 3 s


@dataclass
class Normal:
    """What the normal streams of one phase saw."""

    ttft: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


@dataclass
class Hostile:
    sent: dict[str, int] = field(default_factory=dict)
    answers: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, kind: str, answer: str) -> None:
        self.sent[kind] = self.sent.get(kind, 0) + 1
        per = self.answers.setdefault(kind, {})
        per[answer] = per.get(answer, 0) + 1


def chat(port: int, stream: bool = True, temperature: float | None = None, content: str = "Tell me a story.") -> bytes:
    body: dict[str, object] = {
        "model": "llmchaos-sim-8b",
        "stream": stream,
        "max_tokens": 24,
        "messages": [{"role": "user", "content": content}],
    }
    if temperature is not None:
        body["temperature"] = temperature
    raw = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"x-llmchaos-lang: en\r\ncontent-length: {len(raw)}\r\n\r\n"
    )
    return head.encode() + raw


async def open_conn(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)


async def normal_request(port: int, out: Normal) -> None:
    """One streaming request: TTFT to the first content event; a failure unless it ends with [DONE]."""
    start = time.perf_counter()
    try:
        async with asyncio.timeout(60):
            reader, writer = await open_conn(port)
            try:
                writer.write(chat(port))
                status = await reader.readline()
                if b" 200 " not in status:
                    out.failures.append(status.decode(errors="replace").strip() or "no status line")
                    return
                ttft = None
                while line := await reader.readline():
                    if ttft is None and CONTENT.search(line):
                        ttft = time.perf_counter() - start
                    if line.startswith(b"data: [DONE]"):
                        if ttft is None:
                            out.failures.append("no content")
                        else:
                            out.ttft.append(ttft)
                        return
                out.failures.append("stream ended without [DONE]")
            finally:
                writer.close()
    except (OSError, TimeoutError) as e:
        out.failures.append(f"{type(e).__name__}: {e}")


async def normal_load(port: int, start: float, seconds: float, out: Normal) -> None:
    """Open loop from unix time `start`: a request every 1/RATE s, whatever the earlier ones are doing."""
    tasks = []
    for k in range(int(seconds * RATE)):
        await asyncio.sleep(max(0.0, start + k / RATE - time.time()))
        tasks.append(asyncio.create_task(normal_request(port, out)))
    await asyncio.gather(*tasks)


async def status_of(port: int, request: bytes, responses: int = 1) -> str:
    """Send `request` on a new connection; the status codes of the first `responses` answers."""
    reader, writer = await open_conn(port)
    try:
        writer.write(request)
        codes = []
        async with asyncio.timeout(30):
            for _ in range(responses):
                status = await reader.readline()
                codes.append(status.split(b" ")[1].decode() if status.count(b" ") >= 2 else "closed")
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
        return "+".join(codes)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
        return type(e).__name__
    finally:
        writer.close()


async def poison(port: int, h: Hostile) -> None:
    h.count("poison temperature", await status_of(port, chat(port, stream=False, temperature=0.001)))


async def huge_body(port: int, h: Hostile, request: bytes) -> None:
    h.count("10 MB body", await status_of(port, request))


async def pipelined(port: int, h: Hostile) -> None:
    h.count("two pipelined", await status_of(port, chat(port, stream=False) * 2, responses=2))


async def disconnect(port: int, h: Hostile) -> None:
    """A stream its client leaves after the first bytes."""
    try:
        reader, writer = await open_conn(port)
        writer.write(chat(port))
        await asyncio.wait_for(reader.read(1), 30)
        writer.transport.abort()
        h.count("disconnect mid-stream", "left")
    except (OSError, TimeoutError) as e:
        h.count("disconnect mid-stream", type(e).__name__)


async def slowloris(port: int, h: Hostile, stop: asyncio.Event, kind: str) -> None:
    """One connection sending a request head a byte a second, reopened whenever the target answers
    it (408) or closes it."""
    head = f"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nx-slow: {'a' * 200}\r\n\r\n".encode()
    while not stop.is_set():
        try:
            reader, writer = await open_conn(port)
            answered = asyncio.create_task(reader.read(1))  # the target's 408, or its close
            for byte in head:
                if stop.is_set() or answered.done():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(1.0)
            h.count(kind, "cut off" if answered.done() else "still open at the end")
            answered.cancel()
            writer.close()
        except OSError:
            h.count(kind, "cut off")
            await asyncio.sleep(0.2)


async def every(interval: float, action: Callable[[], Coroutine[object, object, None]], stop: asyncio.Event) -> None:
    tasks = []
    while not stop.is_set():
        tasks.append(asyncio.create_task(action()))
        await asyncio.sleep(interval)
    await asyncio.gather(*tasks)


async def hostile_mix(server: int, proxy: int, h: Hostile, stop: asyncio.Event) -> None:
    huge = chat(proxy, stream=False, content="x" * (10 * MIB))
    await asyncio.gather(
        every(0.5, lambda: poison(proxy, h), stop),
        every(2.0, lambda: huge_body(proxy, h, huge), stop),
        every(1.0, lambda: pipelined(proxy, h), stop),
        every(0.25, lambda: disconnect(proxy, h), stop),
        *(slowloris(server, h, stop, "slowloris at the server") for _ in range(SLOWLORIS)),
        *(slowloris(proxy, h, stop, "slowloris at the proxy") for _ in range(SLOWLORIS)),
    )


def hostile_blocks(t0: float) -> list[tuple[float, float]]:
    """(start, end) unix times of the hostile blocks: every second block from t0."""
    return [(t0 + (2 * i + 1) * BLOCK, t0 + (2 * i + 2) * BLOCK) for i in range(PAIRS)]


async def mix(server: int, proxy: int, t0: float) -> Hostile:
    """The hostile mix in its blocks (run in a process of its own, so its work does not delay the
    normal client's reads)."""
    h = Hostile()
    for start, end in hostile_blocks(t0):
        await asyncio.sleep(max(0.0, start - time.time()))
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(end - time.time(), stop.set)
        await hostile_mix(server, proxy, h, stop)
    return h


async def sample_memory(procs: dict[str, psutil.Process], samples: dict[str, list[tuple[float, int]]]) -> None:
    while True:
        for name, p in procs.items():
            samples[name].append((time.time(), p.memory_info().rss))
        await asyncio.sleep(0.5)


async def run(server: int, proxy: int, procs: dict[str, psutil.Process]) -> tuple[Normal, Normal, Hostile, dict]:
    t0 = time.time() + WARMUP
    child = await asyncio.create_subprocess_exec(
        *module("hostile_soak", "--mix", str(server), str(proxy), repr(t0)), cwd=ROOT, stdout=subprocess.PIPE
    )
    memory: dict[str, list[tuple[float, int]]] = {name: [] for name in procs}
    sampler = asyncio.create_task(sample_memory(procs, memory))
    await normal_load(proxy, time.time(), WARMUP - 0.5, Normal())
    alone, hostile = Normal(), Normal()
    for i in range(2 * PAIRS):
        await normal_load(proxy, t0 + i * BLOCK, BLOCK, hostile if i % 2 else alone)
    out, _ = await child.communicate()
    sampler.cancel()
    blocks = hostile_blocks(t0)
    rss = {
        name: [[r for t, r in samples if start <= t < end] for start, end in (blocks[0], blocks[-1])]
        for name, samples in memory.items()
    }
    return alone, hostile, Hostile(**json.loads(out)), rss


def main() -> int:
    if sys.argv[1:2] == ["--mix"]:
        server, proxy, t0 = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
        print(json.dumps(asdict(asyncio.run(mix(server, proxy, t0)))))
        return 0
    with process(SERVE, cpu=0, health="/healthz") as (server_url, server_ps):
        proxy_cmd = llmchaos("proxy", "--listen", "127.0.0.1:{port}", "--upstream", server_url, "--header-timeout", "3")
        with process(proxy_cmd, cpu=1, health="/healthz") as (proxy_url, proxy_ps):
            ports = [int(u.rsplit(":", 1)[1]) for u in (server_url, proxy_url)]
            reference, hostile, h, memory = asyncio.run(
                run(ports[0], ports[1], {"server": server_ps, "proxy": proxy_ps})
            )
    p99 = {
        name: nearest_rank(n.ttft, 99) if n.ttft else float("nan")
        for name, n in (("alone", reference), ("hostile", hostile))
    }
    ratio = p99["hostile"] / p99["alone"]
    print(
        f"normal streams alone:         {len(reference.ttft):4d} ok, {len(reference.failures)} failed, "
        f"TTFT p50 {nearest_rank(reference.ttft, 50) * 1000:6.1f} ms p99 {p99['alone'] * 1000:6.1f} ms"
    )
    print(
        f"normal streams, hostile mix:  {len(hostile.ttft):4d} ok, {len(hostile.failures)} failed, "
        f"TTFT p50 {nearest_rank(hostile.ttft, 50) * 1000:6.1f} ms p99 {p99['hostile'] * 1000:6.1f} ms "
        f"({ratio:.2f}x)"
    )
    for failure in (reference.failures + hostile.failures)[:5]:
        print(f"  failed: {failure}")
    for kind, answers in sorted(h.answers.items()):
        print(f"hostile {kind:24} {h.sent[kind]:5d} sent: " + ", ".join(f"{a} {n}" for a, n in sorted(answers.items())))
    flat = True
    for name, (first_block, last_block) in memory.items():
        first, last = min(first_block), min(last_block)
        ok = last <= max(first * 1.2, first + 32 * MIB)
        flat &= ok
        print(
            f"{name} RSS, first to last hostile block: {first / MIB:6.1f} -> {last / MIB:6.1f} MiB "
            f"({'flat' if ok else 'GROWING'})"
        )
    ok = ratio <= 1.5 and not reference.failures and not hostile.failures and flat
    print(f"target TTFT p99 within 1.5x, 0 normal failures, memory flat: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
