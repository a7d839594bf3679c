"""The reference server's engine, measured from outside: real `llmchaos serve` processes on loopback.

Every check compares against ground truth the test itself knows (token counts it asked for,
usage figures the server returned, the cost model's own ratios) or against a second measurement
taken in the same run; none relies on how fast this machine is.

Servers are started once per module and shared by the tests that need the same flags.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from llmchaos import languages, tokenizer
from llmchaos.sse_codec import Decoder
from reference_server import profile
from reference_server.executors.sim import CATCH_UP_S
from tests.integration.conftest import engine_args, math_bound, sim_only
from tests.noise import WakeNoise
from tests.procs import Server, serve

MODEL = "llmchaos-sim-8b"
TOKEN = "T"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
VLLM_TTFT_BUCKETS = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
]
VLLM_ITL_BUCKETS = [
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
]


# -- servers (one start per distinct flag set) -----------------------------------------------
@pytest.fixture(scope="module")
def real_time(engine: str) -> Iterator[Server]:
    """The cost model at its calibrated speed, without jitter (torch: real steps); admin API on."""
    with serve(*engine_args(engine, "--sim-time-scale", "1", "--sim-jitter", "0", "--admin-token", TOKEN)) as s:
        yield s


@pytest.fixture(scope="module")
def no_cache(engine: str) -> Iterator[Server]:
    """As `real_time`, but no prefix caching and no admin token."""
    with serve(*engine_args(engine, "--sim-time-scale", "1", "--sim-jitter", "0", "--no-prefix-caching")) as s:
        yield s


@pytest.fixture(scope="module")
def math_profile(tmp_path_factory: pytest.TempPathFactory) -> str:
    return math_bound(tmp_path_factory.mktemp("profile"))


@pytest.fixture(scope="module")
def slow_clock(math_profile: str) -> Iterator[Server]:
    """All-math steps 20x slower (a 14 ms decode step takes 0.28 s); admin API on."""
    with serve("--profile", math_profile, "--sim-time-scale", "20", "--admin-token", TOKEN) as s:
        yield s


@pytest.fixture(scope="module")
def tiny_kv(engine: str) -> Iterator[Server]:
    """64 blocks of 16 tokens: 1024 token slots in all. Fast clock (0.1), no pacer."""
    kv = ("--num-blocks", "64", "--block-size", "16", "--max-model-len", "1024", "--watermark", "0")
    with serve(*engine_args(engine, *kv, "--sim-time-scale", "0.1")) as s:
        yield s


@pytest.fixture(scope="module")
def wfq(engine: str) -> Iterator[Server]:
    policy = ("--policy", "wfq", "--lang-weights", "en=1,de=1", "--max-num-seqs", "2")
    with serve(*engine_args(engine, *policy, "--sim-time-scale", "0.2")) as s:
        yield s


@pytest.fixture(scope="module")
def fcfs(engine: str) -> Iterator[Server]:
    with serve(*engine_args(engine, "--policy", "fcfs", "--max-num-seqs", "2", "--sim-time-scale", "0.2")) as s:
        yield s


@pytest.fixture(scope="module")
def paced() -> Iterator[Server]:
    with serve("--pacer-rate", "50", "--pacer-max-gap", "0.05", "--sim-time-scale", "0.1") as s:
        yield s


@pytest.fixture(scope="module")
def paced_slow(math_profile: str) -> Iterator[Server]:
    """The pacer of `paced` on all-math steps, which the admin API can slow past its max gap."""
    args = ("--profile", math_profile, "--pacer-rate", "50", "--pacer-max-gap", "0.05", "--admin-token", TOKEN)
    with serve(*args) as s:
        yield s


# -- client helpers -----------------------------------------------------------------------------
@dataclass
class Stream:
    """One streamed /v1/completions request as the client saw it."""

    t0: float
    raw: bytes = b""
    content: list[tuple[float, str, int]] = field(default_factory=list)  # (time, text, completion tokens so far)
    finish_reason: str | None = None
    usage: dict | None = None
    comments: int = 0
    done: bool = False

    @property
    def text(self) -> str:
        return "".join(t for _, t, _ in self.content)

    @property
    def ttft(self) -> float:
        return self.content[0][0] - self.t0

    def gaps(self) -> list[float]:
        times = [t for t, _, _ in self.content]
        return [b - a for a, b in itertools.pairwise(times)]

    def per_token_gaps(self) -> list[float]:
        """Each inter-chunk gap spread over the tokens its chunk delivered (chunks may be merged)."""
        return [(t2 - t1) / (n2 - n1) for (t1, _, n1), (t2, _, n2) in itertools.pairwise(self.content)]


def body(prompt: str | list[int], max_tokens: int, **extra) -> dict:
    return {
        "model": MODEL,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        **extra,
    }


async def stream(client: httpx.AsyncClient, server: Server, req: dict, lang: str = "en") -> Stream:
    """Send `req` and read its whole SSE stream."""
    dec = Decoder()
    out = Stream(t0=time.monotonic())
    async with client.stream("POST", server.url + "/v1/completions", json=req, headers={"x-llmchaos-lang": lang}) as r:
        assert r.status_code == 200, (await r.aread()).decode()
        async for chunk in r.aiter_raw():
            now = time.monotonic()
            out.raw += chunk
            for ev in dec.feed(chunk):
                if ev.data == "[DONE]":
                    out.done = True
                    continue
                obj = json.loads(ev.data)
                if obj.get("usage"):
                    out.usage = obj["usage"]
                for choice in obj["choices"]:
                    if choice["text"]:
                        out.content.append((now, choice["text"], obj["usage"]["completion_tokens"]))
                    if choice["finish_reason"]:
                        out.finish_reason = choice["finish_reason"]
        out.comments = dec.comments
    return out


def client(n: int = 64) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))


def run(coro):
    return asyncio.run(coro)


_LINE = re.compile(r"^([^{\s]+)(?:\{(.*)\})? (\S+)$")


def samples(server: Server) -> list[tuple[str, dict[str, str], float]]:
    """/metrics as (name, labels, value) triples."""
    out = []
    for line in server.scrape().splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        assert m, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def counters(server: Server, *names: str) -> dict[str, float]:
    return {n: server.metric(n) for n in names}


def text_prompt(tag: str, tokens: int, skip_chars: int = 0) -> str:
    """A prefix of a language's running text with about `tokens` tokens (by the shipped tokenizer)."""
    text = languages.get(tag).text()[skip_chars:]
    lo, hi = 0, len(text)
    while lo < hi:  # shortest prefix with at least `tokens` tokens
        mid = (lo + hi) // 2
        if tokenizer.count(text[:mid]) >= tokens:
            hi = mid
        else:
            lo = mid + 1
    return text[:lo]


def wait_for(pred, timeout: float, what: str, interval: float = 0.02) -> float:
    """Poll `pred` until true; returns the seconds it took."""
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - t0


# -- 1. cancellation ----------------------------------------------------------------------------------
@pytest.mark.timing
def test_cancelled_stream_frees_its_blocks_at_once(real_time: Server) -> None:
    s = real_time
    aborts = "vllm:request_success_total"

    def abort_count() -> float:
        return sum(v for n, lab, v in samples(s) if n == aborts and lab.get("finished_reason") == "abort")

    before = abort_count()

    async def hold_and_cancel() -> tuple[float, float]:
        """Read a few events, look at the server while the stream is open, then close it."""
        async with client() as c:
            dec, got = Decoder(), 0
            async with c.stream("POST", s.url + "/v1/completions", json=body("Tell me a very long story.", 4000)) as r:
                chunks = r.aiter_raw()  # held, not broken out of: that would close the connection early
                while got < 5:
                    got += len(dec.feed(await chunks.__anext__()))
                running = await asyncio.to_thread(s.metric, "vllm:num_requests_running")
                usage = await asyncio.to_thread(s.metric, "vllm:kv_cache_usage_perc")
                await r.aclose()  # the client goes away mid-stream
                await chunks.aclose()
        return running, usage

    running, usage = run(hold_and_cancel())
    assert running == 1, "the long stream should be running and holding KV blocks"
    assert usage > 0, "the long stream should be running and holding KV blocks"
    wait_for(
        lambda: s.metric("vllm:num_requests_running") == 0 and s.metric("vllm:kv_cache_usage_perc") == 0.0,
        2.0,
        "running=0 and kv usage=0 after disconnect",
    )
    assert abort_count() == before + 1
    assert s.metric("vllm:num_requests_waiting") == 0


# -- 2. preemption under KV pressure ------------------------------------------------------------------
def test_preemption_under_kv_pressure_keeps_every_output(tiny_kv: Server) -> None:
    s = tiny_kv
    ids = tokenizer.encode(languages.get("en").text())
    prompts = [ids[600 * i : 600 * i + 100] for i in range(8)]  # 8 x 100 distinct tokens, no shared prefix
    reqs = [body(p, 300, seed=1000 + i) for i, p in enumerate(prompts)]

    async def all_at_once() -> list[Stream]:
        async with client() as c:
            return await asyncio.gather(*(stream(c, s, r) for r in reqs))

    async def two_at_a_time() -> list[Stream]:  # 2 x 25 blocks fit in 64: no preemption possible
        out = []
        async with client() as c:
            for i in range(0, len(reqs), 2):
                out += await asyncio.gather(*(stream(c, s, r) for r in reqs[i : i + 2]))
        return out

    p0 = s.metric("vllm:num_preemptions_total")
    pressured = run(all_at_once())
    p1 = s.metric("vllm:num_preemptions_total")
    assert p1 > p0, "8 x 400 tokens in 1024 token slots must preempt"
    for st in pressured:
        assert st.finish_reason == "length"
        assert st.done
        assert st.usage["completion_tokens"] == 300
        assert st.usage["prompt_tokens"] == 100
        assert st.content[-1][2] == 300
    assert s.metric("vllm:kv_cache_usage_perc") == 0.0
    assert s.metric("vllm:num_requests_running") == 0

    # Ground truth for the outputs: the same seeded requests, run where nothing is preempted.
    reference = run(two_at_a_time())
    assert s.metric("vllm:num_preemptions_total") == p1
    for got, want in zip(pressured, reference, strict=True):
        assert got.text == want.text, "recompute after preemption changed a request's output"


@pytest.mark.timing
def test_abandoned_non_streaming_request_is_cancelled(tiny_kv: Server) -> None:
    """A client that gives up on a non-streaming request must free its slot too (README: any client)."""
    s = tiny_kv

    def by_reason(reason: str) -> float:
        return sum(
            v for n, lab, v in samples(s) if n == "vllm:request_success_total" and lab["finished_reason"] == reason
        )

    abort0, length0 = by_reason("abort"), by_reason("length")
    gen0 = s.metric("vllm:generation_tokens_total")
    req = {"model": MODEL, "prompt": "Tell me a long story.", "max_tokens": 900, "ignore_eos": True}
    with pytest.raises(httpx.TimeoutException):  # ~1.3 s of decoding at this clock; give up long before
        httpx.post(s.url + "/v1/completions", json=req, timeout=0.3)
    # Either way the request ends (cancelled, or after all 900 tokens); then see which it was.
    wait_for(lambda: s.metric("vllm:num_requests_running") == 0, 10.0, "the request to end")
    generated = s.metric("vllm:generation_tokens_total") - gen0
    assert by_reason("length") == length0, f"ran to completion after the client left ({generated:g} tokens)"
    assert by_reason("abort") == abort0 + 1
    assert generated < 900


# -- 3. prefix caching --------------------------------------------------------------------------------
def _ttft_twice(s: Server, prompt: str) -> tuple[Stream, Stream, float, float]:
    async def go() -> tuple[Stream, Stream, float, float]:
        async with client() as c:
            # A warm connection and server path for both requests, and a long prefill of other tokens first
            # (torch's first long prefill on a cold CPU takes twice as long as the next).
            await stream(c, s, body(text_prompt("ja", 1500), 1))
            h0 = await asyncio.to_thread(s.metric, "vllm:prefix_cache_hits_total")
            first = await stream(c, s, body(prompt, 4))
            h1 = await asyncio.to_thread(s.metric, "vllm:prefix_cache_hits_total")
            second = await stream(c, s, body(prompt, 4))
            h2 = await asyncio.to_thread(s.metric, "vllm:prefix_cache_hits_total")
            return first, second, h1 - h0, h2 - h1

    return run(go())


_ATTEMPTS = itertools.count()


@pytest.mark.timing
def test_prefix_cache_hit_lowers_ttft(real_time: Server, no_cache: Server) -> None:
    """A wake-up delay (tests/noise.py) may land on either request: the comparisons allow it once.
    Each attempt asks with a prompt of its own: a rerun's first request starts cold too. 4,000 tokens:
    the hit leaves the sim's TTFT at 0.23 of the cold one (1,500 left it at 0.45, and a busy make test
    once took the half away)."""
    prompt = text_prompt("en", 4000, skip_chars=1000 * next(_ATTEMPTS))
    n = tokenizer.count(prompt)
    assert 4000 <= n <= 4010

    with WakeNoise() as noise:
        first, second, cold_hits, warm_hits = _ttft_twice(real_time, prompt)
    assert first.usage["prompt_tokens"] == n == second.usage["prompt_tokens"]
    assert cold_hits == 0, "the first request must start cold"
    assert warm_hits >= 3900
    assert warm_hits == (n - 1) // 16 * 16  # every full block but the last token's
    assert second.ttft - noise.worst < 0.5 * first.ttft, (first.ttft, second.ttft, noise.worst)

    with WakeNoise() as noise:
        first, second, cold_hits, warm_hits = _ttft_twice(no_cache, prompt)
    assert cold_hits == warm_hits == 0
    assert second.ttft > 0.8 * (first.ttft - noise.worst), (first.ttft, second.ttft, noise.worst)


# -- 4. weighted fair queuing ---------------------------------------------------------------------------
def _admission_order(s: Server) -> tuple[list[str], dict[tuple[str, str], float]]:
    """Fill both slots with two long 'fr' blockers, queue 30 en then 10 de, release the blockers.

    Returns the languages in first-token (= admission) order and the per-language queue gauge
    read while all 40 were waiting.
    """

    def gauge() -> dict[tuple[str, str], float]:
        return {(lab["lang"], lab["queue"]): v for n, lab, v in samples(s) if n == "llmchaos_server_queue_length"}

    async def go() -> tuple[list[str], dict]:
        async with client(80) as c:
            release = asyncio.Event()

            async def blocker() -> None:
                async with c.stream(
                    "POST", s.url + "/v1/completions", json=body("hold", 4000), headers={"x-llmchaos-lang": "fr"}
                ) as r:
                    async for _ in r.aiter_raw():
                        if release.is_set():
                            break
                        await asyncio.sleep(0)
                    # leaving closes the stream: the engine aborts it and frees its slot

            async def poll(pred, what: str) -> None:
                t0 = time.monotonic()
                while not pred(await asyncio.to_thread(gauge)):
                    assert time.monotonic() - t0 < 10, f"timed out waiting for {what}"
                    await asyncio.sleep(0.02)

            blockers = [asyncio.create_task(blocker()) for _ in range(2)]
            await poll(lambda g: g.get(("fr", "running")) == 2, "2 running blockers")
            en = [asyncio.create_task(stream(c, s, body("Hello there", 20), "en")) for _ in range(30)]
            await poll(lambda g: g.get(("en", "waiting")) == 30, "30 en waiting")
            de = [asyncio.create_task(stream(c, s, body("Hello there", 20), "de")) for _ in range(10)]
            await poll(lambda g: g.get(("de", "waiting")) == 10, "10 de waiting")
            backlog = await asyncio.to_thread(gauge)
            release.set()
            await asyncio.gather(*blockers)
            done = await asyncio.gather(*en, *de)
        for st in done:
            assert st.usage["completion_tokens"] == 20
            assert st.finish_reason == "length"
        tagged = sorted([(st.content[0][0], "en") for st in done[:30]] + [(st.content[0][0], "de") for st in done[30:]])
        return [lang for _, lang in tagged], backlog

    return run(go())


@pytest.mark.timing
def test_wfq_caps_a_backlogged_language_at_its_share(wfq: Server, fcfs: Server) -> None:
    order, backlog = _admission_order(wfq)
    # The per-language queue gauge saw the backlog exactly.
    assert backlog == {("fr", "running"): 2, ("en", "waiting"): 30, ("de", "waiting"): 10}
    assert order[:20].count("en") <= 12, order
    assert order[:20].count("de") >= 8, order

    # Control: the same load under FCFS lets en take (nearly) all of the first 20 slots,
    # so the assertion above is one the server can fail.
    order, backlog = _admission_order(fcfs)
    assert backlog == {("fr", "running"): 2, ("en", "waiting"): 30, ("de", "waiting"): 10}
    assert order[:20].count("en") >= 19, order
    # Once drained, no series is left waiting.
    assert not [v for n, lab, v in samples(fcfs) if n == "llmchaos_server_queue_length" and v]


# -- 5. simulated GPU clock ---------------------------------------------------------------------------
def _gaps(s: Server, n: int = 40, repeat: int = 1) -> list[float]:
    """Each of `repeat` streams' typical time per token (the median resists scheduling hiccups on a busy
    machine), one stream after the other (and so at as many moments of the machine's load)."""

    async def go() -> list[float]:
        gaps = []
        async with client() as c:
            for _ in range(repeat):
                st = await stream(c, s, body("Clocks", n))
                assert st.usage["completion_tokens"] == n
                gaps.append(statistics.median(st.per_token_gaps()))
        return gaps

    return run(go())


def _gap(s: Server, n: int = 40, repeat: int = 1) -> float:
    """The median of `_gaps`."""
    return statistics.median(_gaps(s, n, repeat))


def _ttft(s: Server, tokens: int, key: int, tries: int = 3) -> float:
    """The least TTFT of `tries` `tokens`-token prompts no earlier request shared (prefill-heavy steps):
    a busy machine only ever adds to one."""

    async def go() -> float:
        out = []
        async with client() as c:
            for i in range(tries):
                prompt = text_prompt("de", tokens, skip_chars=300 * (tries * key + i))  # the corpus holds them
                out.append((await stream(c, s, body(prompt, 2), "de")).ttft)
        return min(out)

    return run(go())


@pytest.mark.timing
def test_locked_clock_slows_the_steps_math(real_time: Server, no_cache: Server, engine: str) -> None:
    """The locked phase is held against the full-clock phases before and after it, measured in the test.

    sim (the default profile's roofline): only a step's math follows the clock. Locked to a quarter, a
    2,000-token prefill (math-bound) takes at least its locked model time, since a step never ends before
    its model time and a busy machine only adds to it; a one-sequence decode step (bound by the weights'
    reads) is no slower than at full clock; once reset, the prefill takes what it took before the lock,
    give or take the frontend's random draw and the machine's worst delays measured beside it.
    torch: the simulated clock stretches whole steps, real compute on a shared CPU whose time wanders by
    a fifth between two measurements a second apart, and more on a busy machine, so its locked steps lie
    between twice the faster and twice the slower of the two (its unit test alternates steps to check the
    proportion closely)."""
    s, url, sim = real_time, real_time.url + "/admin/device/clocks", engine == "sim"
    mhz, slack, repeat = (495.0, 0.0, 3) if sim else (990.0, 0.2, 5)
    state = httpx.get(url, headers=ADMIN).json()
    assert state == {
        "graphics_mhz": 1980.0,
        "min_graphics_mhz": 210.0,  # the range a clock must lie in (faults read it to check a schedule)
        "max_graphics_mhz": 1980.0,
        "locked": False,
        "slowdown": 1.0,
    }

    with WakeNoise() as noise:
        base = _gap(s, repeat=repeat)
        base_ttft = _ttft(s, 2000, 1) if sim else 0.0
        r = httpx.put(url, headers=ADMIN, json={"graphics_mhz": mhz})
        try:
            assert r.status_code == 200
            assert r.json() == {
                "graphics_mhz": mhz,
                "min_graphics_mhz": 210.0,
                "max_graphics_mhz": 1980.0,
                "locked": True,
                "slowdown": 1980.0 / mhz,
            }
            assert httpx.get(url, headers=ADMIN).json()["locked"] is True
            slow = _gap(s, repeat=repeat)
            slow_ttft = _ttft(s, 2000, 2) if sim else 0.0
        finally:
            r = httpx.delete(url, headers=ADMIN)
        assert r.status_code == 200
        assert r.json()["locked"] is False
        assert r.json()["slowdown"] == 1.0
        assert httpx.get(url, headers=ADMIN).json()["locked"] is False
        each_restored = _gaps(s, repeat=repeat)
        restored = statistics.median(each_restored)
        restored_ttft = _ttft(s, 2000, 3) if sim else 0.0
    figures = {"gaps": (base, slow, restored), "ttfts": (base_ttft, slow_ttft, restored_ttft), "worst": noise.worst}
    if sim:
        step = profile.load(profile.DEFAULT).step  # what the server runs, less its jitter (--sim-jitter 0)
        # The frontend time is a log-normal draw (sigma 8.5 %): 4 sigmas either way.
        low, high = math.exp(-4 * step.frontend_sigma), math.exp(4 * step.frontend_sigma)
        assert slow_ttft >= low * step.frontend + step.time(2000, 0, 2000, 1980.0 / mhz), figures
        assert slow <= 1.15 * max(base, restored) + noise.p95, figures  # decode: the weights' reads
        # Full speed again: what the prefill took before the lock, plus what a busy machine adds (the
        # request's wakes: its frontend, its step, its first token) and the frontend's draws apart.
        assert restored_ttft <= base_ttft + (high - low) * step.frontend + 3 * noise.worst, figures
    else:
        # torch's locked step lasts twice the median of its size's last 9 steps at full clock (a hiccup
        # among them does not move it).
        full = (base, restored)
        assert (1.7 - 2 * slack) * min(full) <= slow <= (2.3 + 2 * slack) * max(full), figures
        # full speed again: the fastest stream since (a busy machine only ever adds to one), under the
        # locked ones by the range's own slack: a token's gap is its step and the stream's own work, which
        # no clock stretches and a hog on each core lengthens (5.1 ms restored, 7.2 locked: 1.4x)
        assert min(each_restored) < slow / (1.5 - slack), figures

    # Auth and validation.
    assert httpx.put(url, headers={"authorization": "Bearer wrong"}, json={"graphics_mhz": 990}).status_code == 401
    assert httpx.get(url).status_code == 401
    assert (
        httpx.put(no_cache.url + "/admin/device/clocks", headers=ADMIN, json={"graphics_mhz": 990}).status_code == 403
    )
    for bad in (0, -5, 1981, 5000):
        r = httpx.put(url, headers=ADMIN, json={"graphics_mhz": bad})
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"]["param"] == "graphics_mhz"
    assert httpx.put(url, headers=ADMIN, json={"graphics_mhz": 990, "x": 1}).status_code == 400
    assert httpx.get(url, headers=ADMIN).json()["locked"] is False  # nothing stuck


def test_clocks_outside_the_device_range_are_400_and_nothing_sticks(real_time: Server) -> None:
    """1e-300 MHz was accepted and left the engine asleep in a step ~1e300 s long, /healthz 503 until a
    restart, DELETE or not. Now the clock must be in the device's range (H100: 210..1980 MHz)."""
    s, url = real_time, real_time.url + "/admin/device/clocks"
    for raw in (
        b'{"graphics_mhz": 1e-300}',
        b'{"graphics_mhz": 209}',
        b'{"graphics_mhz": NaN}',
        b'{"graphics_mhz": 1e999}',
    ):
        r = httpx.put(url, headers={**ADMIN, "content-type": "application/json"}, content=raw)
        assert r.status_code == 400, (raw, r.text)
        err = r.json()["error"]
        assert err["param"] == "graphics_mhz", err
        assert "210" in err["message"], err
    assert httpx.get(url, headers=ADMIN).json()["locked"] is False
    assert httpx.get(s.url + "/healthz").status_code == 200
    assert _gap(s, 5) > 0  # a request still runs to the end


@pytest.mark.timing
def test_reset_wakes_a_step_scheduled_at_the_lowest_clock(slow_clock: Server) -> None:
    """A step that started at 210 MHz finishes at full speed once the clock is reset."""
    s, url = slow_clock, slow_clock.url + "/admin/device/clocks"
    assert httpx.put(url, headers=ADMIN, json={"graphics_mhz": 210}).status_code == 200
    try:

        async def go() -> tuple[Stream, float]:
            async with client() as c:
                req = asyncio.create_task(stream(c, s, body("Wake up", 3)))
                await asyncio.sleep(1.2)  # prefill took ~0.8 s; the first decode step (2.65 s) is under way
                r = await c.delete(url, headers=ADMIN)
                assert r.status_code == 200
                t0 = time.monotonic()
                return await req, time.monotonic() - t0

        st, after_reset = run(go())
    finally:
        httpx.delete(url, headers=ADMIN)
    assert st.usage["completion_tokens"] == 3
    # Locked, the rest took ~2.5 s (2.2 s of the sleeping step, then one at full speed); woken, ~0.5 s.
    assert after_reset < 1.3, after_reset
    assert httpx.get(s.url + "/healthz").status_code == 200


# -- 6. output pacer ----------------------------------------------------------------------------------
@pytest.mark.timing
def test_pacer_spaces_tokens_at_its_rate(paced: Server, tiny_kv: Server, engine: str) -> None:
    sim_only(engine, "the paced server is sim's: the control must run on the same simulated clock")

    async def gaps(s: Server) -> tuple[Stream, float]:
        async with client() as c:
            st = await stream(c, s, body("Pace me", 30))
        assert st.usage["completion_tokens"] == 30
        return st, statistics.median(st.gaps())

    with WakeNoise() as noise:
        st, with_pacer = run(gaps(paced))
    assert len(st.content) == 30, "the pacer releases one token per frame"
    assert 0.015 <= with_pacer <= 0.030 + noise.worst, (with_pacer, noise.worst)
    _, without = run(gaps(tiny_kv))  # same sim clock (0.1), no pacer
    assert without < with_pacer / 4, (without, with_pacer)


@pytest.mark.timing
def test_pacer_heartbeats_while_the_engine_is_slow(paced_slow: Server) -> None:
    url = paced_slow.url + "/admin/device/clocks"
    r = httpx.put(url, headers=ADMIN, json={"graphics_mhz": 210})  # the lowest clock: each step ~130 ms
    assert r.status_code == 200
    assert r.json()["slowdown"] == pytest.approx(1980 / 210)
    try:

        async def go() -> Stream:
            async with client() as c:
                return await stream(c, paced_slow, body("Beat", 4))

        st = run(go())
    finally:
        httpx.delete(url, headers=ADMIN)
    assert st.usage["completion_tokens"] == 4
    assert st.finish_reason == "length"
    frames = [f for f in st.raw.split(b"\n\n") if f]
    kinds = ["comment" if f.startswith(b":") else "data" for f in frames]
    comments = [f for f in frames if f.startswith(b":")]
    assert comments
    assert st.comments == len(comments)
    for f in comments:  # a comment frame carries no field at all, so no content
        assert all(line.startswith(b":") for line in f.split(b"\n")), f
    # Heartbeats sit between content events, not only before the first or after the last.
    content_idx = [
        i
        for i, f in enumerate(frames)
        if f.startswith(b"data: {") and b'"text":""' not in f and b'"choices":[]' not in f
    ]
    assert len(content_idx) >= 2
    between = kinds[content_idx[0] : content_idx[-1]].count("comment")
    assert between >= 1, kinds
    assert st.text == "".join(t for _, t, _ in st.content)
    assert len(st.content) == 4


def test_paced_stream_usage_counts_tokens_delivered(paced: Server) -> None:
    """With continuous_usage_stats each chunk's usage describes the stream up to that chunk."""

    async def go() -> Stream:
        async with client() as c:
            return await stream(c, paced, body("Count me", 10))

    st = run(go())
    assert len(st.content) == 10  # one token per paced frame
    assert [n for _, _, n in st.content] == list(range(1, 11))


# -- 7. metrics against ground truth ------------------------------------------------------------------
def test_metrics_match_what_clients_received(real_time: Server) -> None:
    """Counters equal the usage the clients got. (The per-language queue gauge is checked against a
    known backlog in the WFQ test, the only place one is built.)"""
    s, n, max_tokens = real_time, 6, 12
    names = (
        "vllm:generation_tokens_total",
        "vllm:prompt_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_generation_tokens_sum",
        "vllm:request_prompt_tokens_sum",
    )
    before = counters(s, *names)
    length_before = sum(
        v for m, lab, v in samples(s) if m == "vllm:request_success_total" and lab["finished_reason"] == "length"
    )
    prompts = [text_prompt(tag, 20 + 7 * i) for i, tag in enumerate(["en", "de", "fr", "es", "it", "ja"])]

    async def go() -> list[Stream]:
        async with client() as c:
            return await asyncio.gather(
                *(
                    stream(c, s, body(p, max_tokens), tag)
                    for p, tag in zip(prompts, ["en", "de", "fr", "es", "it", "ja"], strict=True)
                )
            )

    got = run(go())
    after = counters(s, *names)
    d = {k: after[k] - before[k] for k in names}
    completion = sum(st.usage["completion_tokens"] for st in got)
    prompt = sum(st.usage["prompt_tokens"] for st in got)
    assert completion == n * max_tokens
    assert prompt == sum(tokenizer.count(p) for p in prompts)
    assert d["vllm:generation_tokens_total"] == completion == d["vllm:request_generation_tokens_sum"]
    assert d["vllm:prompt_tokens_total"] == prompt == d["vllm:request_prompt_tokens_sum"]
    assert d["vllm:time_to_first_token_seconds_count"] == n
    assert d["vllm:inter_token_latency_seconds_count"] == n * (max_tokens - 1)
    assert d["vllm:e2e_request_latency_seconds_count"] == n
    length_after = sum(
        v for m, lab, v in samples(s) if m == "vllm:request_success_total" and lab["finished_reason"] == "length"
    )
    assert length_after - length_before == n

    all_samples = samples(s)
    ttft_le = [lab["le"] for m, lab, _ in all_samples if m == "vllm:time_to_first_token_seconds_bucket"]
    assert ttft_le == [str(b) for b in VLLM_TTFT_BUCKETS] + ["+Inf"]
    itl_le = [lab["le"] for m, lab, _ in all_samples if m == "vllm:inter_token_latency_seconds_bucket"]
    assert itl_le == [str(b) for b in VLLM_ITL_BUCKETS] + ["+Inf"]
    vllm = [(m, lab) for m, lab, _ in all_samples if m.startswith("vllm:")]
    assert vllm
    assert all(lab.get("model_name") == MODEL for _, lab in vllm)
    # Buckets are cumulative and end at the count.
    ttft_buckets = [v for m, _, v in all_samples if m == "vllm:time_to_first_token_seconds_bucket"]
    assert ttft_buckets == sorted(ttft_buckets)
    assert ttft_buckets[-1] == s.metric("vllm:time_to_first_token_seconds_count")


FINISH_REASONS = {"stop", "length", "abort", "error", "repetition"}  # vLLM's FinishReason
# Families of vLLM 0.32's PrometheusStatLogger (vllm/v1/metrics/loggers.py) the reference server can fill.
VLLM_FAMILIES = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:num_requests_waiting_by_reason": "gauge",
    "vllm:engine_sleep_state": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:prompt_tokens_by_source": "counter",
    "vllm:prompt_tokens_cached": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
    "vllm:iteration_tokens_total": "histogram",
    "vllm:request_max_num_generation_tokens": "histogram",
    "vllm:request_params_n": "histogram",
    "vllm:request_params_max_tokens": "histogram",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_prefill_kv_computed_tokens": "histogram",
}


def test_metrics_have_vllms_families_labels_and_zero_series() -> None:
    """As vLLM: every series carries engine="0", request_success has a series per finish reason from
    the start, and each family holds what the requests really did (prompt tokens computed or found
    in the prefix cache, tokens per engine step, the max_tokens asked for)."""
    with serve("--sim-time-scale", "0.1", "--sim-jitter", "0") as s:
        text = s.scrape()
        # A counter's TYPE line names it with its _total suffix (as vLLM's, from the same client library).
        types = {
            n.removesuffix("_total") if t == "counter" else n: t
            for n, t in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
        }
        assert {f: types.get(f) for f in VLLM_FAMILIES} == VLLM_FAMILIES
        at_start = samples(s)
        assert all(
            lab.get("engine") == "0" and lab.get("model_name") == MODEL for n, lab, _ in at_start if "vllm:" in n
        )
        success = {lab["finished_reason"]: v for n, lab, v in at_start if n == "vllm:request_success_total"}
        assert success == dict.fromkeys(FINISH_REASONS, 0.0)
        sleep = {lab["sleep_state"]: v for n, lab, v in at_start if n == "vllm:engine_sleep_state"}
        assert sleep == {"awake": 1.0, "weights_offloaded": 0.0, "discard_all": 0.0}
        waiting = {lab["reason"] for n, lab, _ in at_start if n == "vllm:num_requests_waiting_by_reason"}
        assert waiting == {"capacity", "deferred"}

        def totals() -> dict[str, float]:
            out: dict[str, float] = {}
            for n, lab, v in samples(s):
                key = n + "".join(f"[{lab[k]}]" for k in ("source",) if k in lab)
                if not n.endswith("_bucket") and "vllm:" in n:
                    out[key] = out.get(key, 0.0) + v
            return out

        # The same prompt twice, one after the other: the second finds its full blocks cached.
        prompt, max_tokens = text_prompt("en", 100), (7, 9)
        before = totals()

        async def go() -> list[Stream]:
            async with client() as c:
                return [await stream(c, s, body(prompt, m)) for m in max_tokens]

        got = run(go())
        d = {k: v - before.get(k, 0.0) for k, v in totals().items()}
        p = got[0].usage["prompt_tokens"]
        cached = (p - 1) // 16 * 16  # the second request: every full block but the one holding the last token
        assert d["vllm:prompt_tokens_total"] == 2 * p
        assert d["vllm:prefix_cache_hits_total"] == cached
        assert d["vllm:prompt_tokens_cached_total"] == cached
        assert d["vllm:prompt_tokens_by_source_total[local_cache_hit]"] == cached
        assert d["vllm:prompt_tokens_by_source_total[local_compute]"] == 2 * p - cached
        assert d["vllm:prompt_tokens_by_source_total[external_kv_transfer]"] == 0
        assert d["vllm:request_prefill_kv_computed_tokens_sum"] == 2 * p - cached
        assert d["vllm:request_prefill_kv_computed_tokens_count"] == 2
        # Each engine step counts the prompt tokens it computed and the tokens it generated.
        assert d["vllm:iteration_tokens_total_sum"] == 2 * p - cached + sum(max_tokens)
        assert d["vllm:request_params_max_tokens_sum"] == sum(max_tokens)
        assert d["vllm:request_max_num_generation_tokens_sum"] == sum(max_tokens)
        assert (d["vllm:request_params_n_sum"], d["vllm:request_params_n_count"]) == (2, 2)
        assert d["vllm:request_inference_time_seconds_count"] == 2
        assert d["vllm:request_inference_time_seconds_sum"] == pytest.approx(
            d["vllm:request_prefill_time_seconds_sum"] + d["vllm:request_decode_time_seconds_sum"]
        )
        assert d["vllm:request_success_total"] == 2


# -- 8. the profile's step model -----------------------------------------------------------------------
@pytest.mark.timing
def test_a_lone_request_takes_no_less_than_the_profiles_step_times(real_time: Server, engine: str) -> None:
    """At low load a request's TTFT is at least the profile's frontend time plus its prefill step, and
    its 49 tokens after the first at least as many one-sequence decode steps: a step never ends before
    its model time, and a busy machine only adds. How close the server comes to its model is
    benchmarks/standin_accuracy's to measure (make bench), not a test's on a shared machine."""
    sim_only(engine, "torch's steps are its forward passes")
    s, step = real_time, profile.load(profile.DEFAULT).step  # what the server runs (--sim-jitter 0)
    names = (
        "vllm:time_to_first_token_seconds_sum",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_sum",
        "vllm:inter_token_latency_seconds_count",
        "vllm:prefix_cache_hits_total",
    )
    for key in range(3):
        prompt = text_prompt("fr", 1000, skip_chars=5000 + 6000 * key)  # shares no prefix with other requests
        before = counters(s, *names)

        async def go(prompt: str = prompt) -> Stream:
            async with client() as c:
                return await stream(c, s, body(prompt, 50), "fr")

        st = run(go())
        d = {k: v - before[k] for k, v in counters(s, *names).items()}
        n = st.usage["prompt_tokens"]
        assert n == tokenizer.count(prompt) >= 1000
        assert d["vllm:prefix_cache_hits_total"] == 0
        assert d["vllm:time_to_first_token_seconds_count"] == 1
        assert d["vllm:inter_token_latency_seconds_count"] == 49
        # The frontend time is a log-normal draw (sigma 8.5 %): 4 sigmas below is its floor.
        floor = math.exp(-4 * step.frontend_sigma) * step.frontend + step.time(n, 0, n)
        assert d["vllm:time_to_first_token_seconds_sum"] >= floor, (d, floor)
        # A first token sent late lets the steps after it begin up to CATCH_UP_S before the engine runs
        # them (so a busy machine's lateness does not add up), never before the step ahead was due.
        decode = sum(step.time(0, 1, n + k) for k in range(1, 50))
        assert d["vllm:inter_token_latency_seconds_sum"] >= decode - CATCH_UP_S, (d, decode)
    assert "llmchaos_sim_late_seconds_total" in {k.split("{")[0] for k in s.metrics()}  # how far it fell behind


# -- 10. a huge prompt and everyone else --------------------------------------------------------------
@pytest.mark.timing
def test_streams_keep_flowing_while_a_huge_prompt_is_tokenized(real_time: Server, engine: str) -> None:
    """A prompt just under the body limit takes seconds to tokenize; the streams already running
    must not notice. The same streams run twice in this test, without and then with the huge
    request, and their worst inter-chunk gap is compared (it was the whole tokenization, ~5 s)."""
    sim_only(engine, "the huge prompt is refused before the engine: the HTTP path is the same for torch")
    s, n = real_time, 200
    huge = json.dumps({"model": MODEL, "prompt": "word " * 700_000, "max_tokens": 1}).encode()  # 3.5 MB, under 4 MiB
    assert len(huge) < 4 * 1024 * 1024

    async def worst_gap(with_huge: bool) -> tuple[float, float]:
        async with client() as c:
            streams = [asyncio.create_task(stream(c, s, body(f"Flow {i}", n))) for i in range(4)]
            await asyncio.sleep(0.3)  # every stream is decoding
            t0 = time.monotonic()
            if with_huge:
                r = await c.post(s.url + "/v1/completions", content=huge, headers={"content-type": "application/json"})
                assert r.status_code == 400, r.text  # tokenized, then over the context window
                assert "context length" in r.json()["error"]["message"]
            took = time.monotonic() - t0
            done = await asyncio.gather(*streams)
        assert all(st.usage["completion_tokens"] == n for st in done)
        return max(g for st in done for g in st.gaps()), took

    without, _ = run(worst_gap(False))
    with_huge, tokenizing = run(worst_gap(True))
    print(f"worst gap without {without:.3f}s, with {with_huge:.3f}s; the huge request took {tokenizing:.3f}s")
    assert with_huge < tokenizing / 4, (with_huge, tokenizing)
    assert with_huge < 5 * without, (with_huge, without)


# -- 9. health ----------------------------------------------------------------------------------------
@pytest.mark.timing
def test_healthz_probe_is_real_and_cached(real_time: Server) -> None:
    url = real_time.url + "/healthz"
    first = httpx.get(url).json()
    if first["latency_probe"]["age_seconds"] > 4.0:  # about to expire: take a fresh one
        time.sleep(5.2 - first["latency_probe"]["age_seconds"])
        first = httpx.get(url).json()
    time.sleep(0.05)
    second = httpx.get(url).json()
    assert first["status"] == second["status"] == "ready"
    assert first["model"] == MODEL
    p1, p2 = first["latency_probe"], second["latency_probe"]
    assert p1["ok"] is True
    assert p1["ttft_seconds"] > 0
    assert p2["ttft_seconds"] == p1["ttft_seconds"], "a second call within 5 s reuses the probe"
    assert p2["age_seconds"] > 0
    assert p2["age_seconds"] >= p1["age_seconds"] + 0.04
    # The probe is internal: it never shows in the request metrics.
    assert httpx.get(real_time.url + "/health").status_code == 200


# -- 11. GPU telemetry ----------------------------------------------------------------------------------
def test_without_a_gpu_metrics_has_no_measured_dcgm_series_and_says_why(real_time: Server, engine: str) -> None:
    """torch on the CPU: none, and why. sim: its modelled device's, each marked so (their values:
    tests/integration/test_sim_energy.py)."""
    text = real_time.scrape()
    dcgm = [line for line in text.splitlines() if line.startswith("DCGM_")]
    if engine == "sim":
        assert len(dcgm) == 3
        assert all('llmchaos_power_model="vllm-llama3-8b-h100"' in line for line in dcgm), dcgm
        assert "gauges absent" not in text
    else:
        assert "# DCGM_FI_DEV_* gauges absent: the TorchExecutor runs on no GPU\n" in text
        assert not dcgm
        assert not [line for line in text.splitlines() if line.startswith(("# HELP DCGM_", "# TYPE DCGM_"))]
    assert "vllm:num_requests_running" in text  # the rest of the exposition is whole
