"""`first_event_delay`, `hold` and `jitter` through the proxy, measured against a server that writes
events at known times (tests/servers/scripted.py stamps each event with the moment it wrote it).

Each content event's lateness is when the client read it minus when the server wrote it. Tolerance:
no event is released early (the proxy sleeps until a monotonic deadline, so never before it); late
by at most LATE (50 ms) over the direct path, and at the median by MEDIAN (10 ms): a loopback hop and
the proxy's own work are about 1 ms, the rest is room for this 2-core machine's scheduling while
other tests run; plus, on a busy machine, the worst (or 95th percentile) wake-up delay seen in the
test (tests/noise.py).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator

import httpx
import pytest

from llmchaos.sse_codec import Decoder
from tests.integration.test_sse_proxy import FAULT, proxy
from tests.noise import WakeNoise
from tests.servers import scripted

pytestmark = pytest.mark.timing

TOKENS = 30
SCRIPT = {"ttft_ms": [50, 50], "itl_ms": [20, 20]}  # content written 50 ms, 70 ms, ... 630 ms after receipt
LATE, MEDIAN, EARLY = 0.05, 0.01, 0.001  # EARLY: the two processes' clocks are read at slightly different points


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    with scripted.running(seed=1) as server, proxy(server) as p:
        yield server, p


def read(url: str) -> list[tuple[float, float]]:
    """Per content event: (seconds from the request's send, seconds after the server wrote it)."""
    body = {"model": "m", "stream": True, "max_tokens": TOKENS, "messages": [], "x_script": SCRIPT}
    out, d, start = [], Decoder(), time.time_ns()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as r:
        for raw in r.iter_raw():
            now = time.time_ns()
            for ev in d.feed(raw):
                if ev.data != "[DONE]" and (chunk := json.loads(ev.data))["choices"][0]["delta"].get("content"):
                    out.append(((now - start) / 1e9, (now - chunk["x_sent_ns"]) / 1e9))
    assert len(out) == TOKENS
    return out


def lateness(events: list[tuple[float, float]]) -> list[float]:
    return [late for _, late in events]


def test_first_event_delay_shifts_every_event(urls):
    server, p = urls
    d = 0.3
    httpx.put(p + FAULT, json={"name": "prefill", "first_event_delay": d}).raise_for_status()
    with WakeNoise() as noise:
        direct, late = lateness(read(server)), lateness(read(p))
    assert min(late) >= d - EARLY
    assert max(late) - d - max(direct) < LATE + noise.worst  # TTFT +d, E2E +d, each gap as the server wrote it
    assert statistics.median(late) - d - statistics.median(direct) < MEDIAN + noise.p95


def test_hold_buffers_then_bursts(urls):
    server, p = urls
    hold = 0.3
    httpx.put(p + FAULT, json={"name": "gateway", "hold": hold}).raise_for_status()
    with WakeNoise() as noise:
        direct, through = lateness(read(server)), read(p)
    held = [t for t, late in through if late > LATE + noise.worst]  # written before the hold ended
    assert 5 <= len(held) < TOKENS
    assert held == [t for t, _ in through[: len(held)]]
    assert max(held) - min(held) < MEDIAN + noise.worst  # released at once: inter-chunk gaps ~0
    # The hold counts from the head, which the server writes on receipt, its first event TTFT later
    # (later still if the server woke late): that event goes hold - TTFT after it was written, less
    # the server's lateness; then each as it comes, E2E as direct
    ttft = SCRIPT["ttft_ms"][0] / 1000
    assert hold - ttft - EARLY - noise.worst <= through[0][1] < hold - ttft + LATE + noise.worst
    assert max(lateness(through[len(held) :])) - max(direct) < LATE + noise.worst


def test_jitter_delays_each_event_at_most_jitter_in_order(urls):
    server, p = urls
    jitter = 0.1
    httpx.put(p + FAULT, json={"name": "jitter", "jitter": jitter, "seed": 5}).raise_for_status()
    with WakeNoise() as noise:
        direct, late = lateness(read(server)), lateness(read(p))
    assert min(late) >= -EARLY
    assert max(late) - max(direct) < jitter + LATE + noise.worst  # held at most `jitter`, never summed over events
    assert statistics.median(late) > MEDIAN  # it does delay
