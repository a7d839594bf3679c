"""The sim's modelled energy end to end: a real `llmchaos serve` (the default profile at its calibrated
speed, no jitter), read from /metrics under dcgm-exporter's names as the harness reads a GPU's.

Every expectation is the profile's own model (reference_server/profile.py's `Power` over its step
model), computed here; every time is the server's, bracketed by the client's clock around each scrape.
The model's unit tests (exact, on a fake clock): tests/unit/reference_server/executors/test_power.py."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmchaos.sse_codec import Decoder
from reference_server import profile
from reference_server.profile import Profile
from tests.procs import Server, serve

TOKEN = "T"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
ENERGY, POWER = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_POWER_USAGE"
STREAMS, OUT = 8, 256  # a phase: 8 streams of 256 tokens each, sent at once (255 decode steps of 8, 1.7 s)
LOCK_MHZ = 990.0  # half the clock: a decode step of 8 is memory-bound, as long, at less power


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serve("--sim-time-scale", "1", "--sim-jitter", "0", "--admin-token", TOKEN) as s:
        yield s


@dataclass
class Reading:
    """A scrape: the server read its meter somewhere between `sent` and `got` (client monotonic)."""

    sent: float
    got: float
    energy_mj: float
    power_w: float
    labels: dict[str, str]


async def read(c: httpx.AsyncClient, server: Server) -> Reading:
    sent = time.monotonic()
    text = (await c.get(server.url + "/metrics")).text
    got = time.monotonic()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    energy, power = families[ENERGY].samples[0], families[POWER].samples[0]
    return Reading(sent, got, energy.value, power.value, energy.labels)


def span(a: Reading, b: Reading) -> tuple[float, float]:
    """The shortest and longest the server's time between two scrapes can have been."""
    return b.sent - a.got, b.got - a.sent


async def one_stream(c: httpx.AsyncClient, server: Server, prompt: str, first: asyncio.Event) -> dict:
    req = {"model": "llmchaos-sim-8b", "prompt": prompt, "max_tokens": OUT, "ignore_eos": True, "stream": True}
    req["stream_options"] = {"include_usage": True}
    usage: dict = {}
    dec = Decoder()
    async with c.stream("POST", server.url + "/v1/completions", json=req) as r:
        assert r.status_code == 200, (await r.aread()).decode()
        async for chunk in r.aiter_raw():
            for ev in dec.feed(chunk):
                if ev.data == "[DONE]":
                    continue
                obj = json.loads(ev.data)
                usage = obj.get("usage") or usage
                if any(choice["text"] for choice in obj["choices"]):
                    first.set()
    return usage


@dataclass
class Phase:
    before: Reading
    after: Reading
    during: list[Reading]
    tokens: int
    prompt_tokens: int

    def dynamic_j(self, idle_w: float) -> float:
        """Its joules over the idle floor: the steps' own, whatever the gaps between them."""
        shortest, longest = span(self.before, self.after)
        return (self.after.energy_mj - self.before.energy_mj) / 1000 - idle_w * (shortest + longest) / 2


async def phase(server: Server, tag: str) -> Phase:
    """STREAMS streams at once (short prompts of their own: no prefix cache hit), scraped before, three
    times once they have all decoded for over a second (the power gauge's window), and after."""
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=STREAMS + 2)) as c:
        before = await read(c, server)
        firsts = [asyncio.Event() for _ in range(STREAMS)]
        prompts = [f"{tag} number {i}, say something." for i in range(STREAMS)]
        tasks = [asyncio.create_task(one_stream(c, server, p, e)) for p, e in zip(prompts, firsts, strict=True)]
        for e in firsts:
            await e.wait()
        await asyncio.sleep(1.1)
        during = []
        for _ in range(3):
            during.append(await read(c, server))
            await asyncio.sleep(0.05)
        usages = await asyncio.gather(*tasks)
        after = await read(c, server)
    tokens = sum(u["completion_tokens"] for u in usages)
    assert tokens == STREAMS * OUT
    prompt_tokens = {u["prompt_tokens"] for u in usages}
    assert len(prompt_tokens) == 1, prompt_tokens
    return Phase(before, after, during, tokens, prompt_tokens.pop())


def decode_w(p: Profile, mhz: float) -> float:
    """The board's power during a decode step of STREAMS sequences at `mhz`."""
    return p.power.step_w(STREAMS, mhz / p.max_clock_mhz)


def dynamic_j(p: Profile, prompt: int, mhz: float) -> float:
    """The model's joules over idle for a phase: one prefill step of every prompt (after an idle engine:
    its wake too), then OUT - 1 decode steps of STREAMS sequences, their context growing."""
    s, pw, slowdown = p.step, p.power, p.max_clock_mhz / mhz
    over_idle = pw.dynamic_w / slowdown**pw.clock_exponent
    prefill = STREAMS * prompt
    joules = over_idle * pw.occupancy(prefill) * (s.wake + s.time(prefill, 0, prefill, slowdown))
    for k in range(1, OUT):
        joules += over_idle * pw.occupancy(STREAMS) * s.time(0, STREAMS, STREAMS * (prompt + k), slowdown)
    return joules


@pytest.mark.timing
def test_the_sims_energy_counter_follows_its_power_model_idle_loaded_and_under_a_clock_lock(server: Server) -> None:
    """Idle, the counter rises at exactly idle_w (the scrapes bracket the server's time). Under load it
    rises faster: its joules over the idle floor are the model's steps' (within 10 %: the engine may
    split the first step's prompts across two), and the power gauge, the last second's average, is the
    model's decode step's: the best of three readings within 2 % and none over it (a reading between
    two steps counts the engine's own moment idle, until it records the next step from the last one's
    end, and a busy machine's lost time is idle too). Locked at half the clock, the decode steps take
    as long at less power: the gauge reads the model's lower watts, and the joules a generated token
    costs fall by the model's ratio (within 10 %)."""
    p = profile.load(profile.DEFAULT)
    idle_w = p.power.idle_w

    async def idle() -> tuple[Reading, Reading]:
        async with httpx.AsyncClient(timeout=60) as c:
            a = await read(c, server)
            await asyncio.sleep(1.2)  # over the power gauge's window: no step in it
            return a, await read(c, server)

    a, b = asyncio.run(idle())
    assert a.labels["llmchaos_power_model"] == p.name  # modelled: the harness tells it from a GPU's by this
    assert a.labels["modelName"] == p.gpu_name
    assert b.power_w == pytest.approx(idle_w)
    shortest, longest = span(a, b)
    joules = (b.energy_mj - a.energy_mj) / 1000
    assert idle_w * shortest * (1 - 1e-9) <= joules <= idle_w * longest * (1 + 1e-9), (joules, shortest, longest)

    free = asyncio.run(phase(server, "free"))
    r = httpx.put(server.url + "/admin/device/clocks", headers=ADMIN, json={"graphics_mhz": LOCK_MHZ})
    assert r.status_code == 200, r.text
    try:
        locked = asyncio.run(phase(server, "locked"))
    finally:
        httpx.delete(server.url + "/admin/device/clocks", headers=ADMIN)

    figures = {}
    for name, ph, mhz in (("free", free, p.max_clock_mhz), ("locked", locked, LOCK_MHZ)):
        watts = [x.power_w for x in ph.during]  # every step of the last second a decode step of all the streams
        assert max(watts) == pytest.approx(decode_w(p, mhz), rel=0.02), (name, watts, decode_w(p, mhz))
        assert max(watts) <= decode_w(p, mhz) * (1 + 1e-9), (name, watts)  # what it misses is idle, never more
        measured, model = ph.dynamic_j(idle_w), dynamic_j(p, ph.prompt_tokens, mhz)
        figures[name] = {"joules over idle": measured, "model": model, "J/token": measured / ph.tokens}
        assert measured == pytest.approx(model, rel=0.10), figures
        shortest, longest = span(ph.before, ph.after)
        assert (ph.after.energy_mj - ph.before.energy_mj) / 1000 / longest > 2 * idle_w, figures  # faster
    assert decode_w(p, LOCK_MHZ) < decode_w(p, p.max_clock_mhz)
    predicted = dynamic_j(p, locked.prompt_tokens, LOCK_MHZ) / dynamic_j(p, free.prompt_tokens, p.max_clock_mhz)
    ratio = figures["locked"]["J/token"] / figures["free"]["J/token"]
    assert ratio == pytest.approx(predicted, rel=0.10), (ratio, predicted, figures)
    total = [(ph.after.energy_mj - ph.before.energy_mj) / ph.tokens for ph in (free, locked)]
    assert total[1] < total[0], total  # idle floor and all: a generated token costs less under the lock
