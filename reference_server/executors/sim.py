"""The sim executor: a calibrated step-time model on a simulated device, and an n-gram sampler.

Each step sleeps for the cost model's time (prefill tokens, decode batch size and
context length) times the device's clock slowdown and a seeded jitter; consecutive
steps run deadline to deadline so error never accumulates.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, replace

from llmchaos import languages
from reference_server.batch import Batch
from reference_server.executors import ExecutorOptions, Sampled
from reference_server.executors.ngram import NGramModel
from reference_server.sequence import Sequence

BACK_TO_BACK_S = 0.005  # a step that starts this soon after the last deadline continues from it
MIN_CLOCK_MHZ = 210.0  # H100 SXM's lowest supported graphics clock


@dataclass
class CostModel:
    """Step time of the sim executor, calibrated to an 8B model in bf16 on one H100.

    Decode is memory-bound: a fixed weight read per step plus a KV read per context
    token; prefill is compute-bound per prompt token. Gives TTFT ~60-120 ms for
    1-2K-token prompts at low load and ITL ~10-15 ms up to a batch of 64.
    """

    step_overhead_s: float = 0.004
    prefill_per_token_s: float = 0.00006
    decode_base_s: float = 0.010
    decode_per_seq_s: float = 0.00005
    decode_per_ctx_token_s: float = 4e-8
    jitter: float = 0.03  # sigma of a seeded log-normal factor
    max_clock_mhz: float = 1980.0  # H100 SXM boost clock: the factor is max / locked

    @classmethod
    def zero(cls) -> CostModel:
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def scaled(self, factor: float, jitter: float) -> CostModel:
        """Every step time multiplied by `factor` (0: free), with this jitter."""
        return replace(
            self,
            step_overhead_s=self.step_overhead_s * factor,
            prefill_per_token_s=self.prefill_per_token_s * factor,
            decode_base_s=self.decode_base_s * factor,
            decode_per_seq_s=self.decode_per_seq_s * factor,
            decode_per_ctx_token_s=self.decode_per_ctx_token_s * factor,
            jitter=jitter,
        )


class SimDevice:
    """A GPU whose graphics clock can be locked within its range, like `nvidia-smi -lgc`.

    A step in progress follows the clock: when it changes, the rest of the step's work runs at
    the new clock (a reset wakes a step scheduled at the lowest one)."""

    def __init__(self, max_clock_mhz: float, min_clock_mhz: float = MIN_CLOCK_MHZ) -> None:
        self.max_clock_mhz, self.min_clock_mhz = max_clock_mhz, min_clock_mhz
        self.locked_mhz: float | None = None
        self._waiter: asyncio.Future[None] | None = None  # the step sleeping on this clock

    def lock(self, mhz: float) -> None:
        if not self.min_clock_mhz <= mhz <= self.max_clock_mhz:  # NaN fails this too
            raise ValueError(f"clock must be in [{self.min_clock_mhz:g}, {self.max_clock_mhz:g}] MHz")
        self._set(mhz)

    def reset(self) -> None:
        self._set(None)

    def _set(self, mhz: float | None) -> None:
        self.locked_mhz = mhz
        if self._waiter is not None:
            _wake(self._waiter)

    async def run_until(self, deadline: float) -> float:
        """Sleep until `deadline` (time.monotonic) at the current clock; when the clock changes
        meanwhile, move it by the ratio of the slowdowns. Returns the deadline met. A step already
        due still yields once, so that a free engine never starves the event loop."""
        loop = asyncio.get_running_loop()
        if deadline <= time.monotonic():
            await asyncio.sleep(0)
        while (left := deadline - time.monotonic()) > 0:
            slowdown, self._waiter = self.slowdown, loop.create_future()
            timer = loop.call_later(left, _wake, self._waiter)
            try:
                await self._waiter
            finally:
                timer.cancel()
                self._waiter = None
            now = time.monotonic()
            deadline = now + max(0.0, deadline - now) * self.slowdown / slowdown
        return deadline

    @property
    def clock_mhz(self) -> float:
        return self.locked_mhz or self.max_clock_mhz

    @property
    def slowdown(self) -> float:
        return self.max_clock_mhz / self.clock_mhz


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class SimExecutor:
    def __init__(self, cost: CostModel, seed: int = 0) -> None:
        self.cost = cost
        self.device = SimDevice(cost.max_clock_mhz)
        self.rng = random.Random(seed)
        self._jitter_rng = random.Random(seed ^ 0x5EED)
        self._models: dict[str, NGramModel] = {}
        self._deadline = float("-inf")

    def model(self, lang: str) -> NGramModel:
        if lang not in self._models:
            self._models[lang] = NGramModel(languages.get(lang).paragraphs())
        return self._models[lang]

    def step_time(self, batch: Batch) -> float:
        c = self.cost
        t = c.step_overhead_s + batch.num_prefill_tokens * c.prefill_per_token_s
        if batch.num_decode_seqs:
            t += c.decode_base_s + batch.num_decode_seqs * c.decode_per_seq_s
        t += batch.num_context_tokens * c.decode_per_ctx_token_s
        if c.jitter:
            t *= math.exp(self._jitter_rng.gauss(0.0, c.jitter))
        return t * self.device.slowdown

    def sample(self, seq: Sequence) -> int:
        model = self.model(seq.lang)
        out, rng = seq.output_token_ids, seq.rng or self.rng
        if not out:
            return model.first_token(seq.prompt_token_ids, seq.params, rng)
        allow_eos = not seq.params.ignore_eos and len(out) >= seq.params.min_tokens
        return model.sample(out[-2] if len(out) > 1 else model.bos, out[-1], seq.params, rng, allow_eos)

    def sample_or_error(self, seq: Sequence) -> Sampled:
        """`sample`, with a failure kept to the one sequence it belongs to."""
        try:
            return self.sample(seq)
        except Exception as e:  # noqa: BLE001 - any sampler bug fails only this request (the engine logs it)
            return e

    async def execute(self, batch: Batch) -> list[Sampled]:
        now = time.monotonic()
        # Back-to-back steps run deadline to deadline, so the engine's own work between
        # steps is inside the modelled step time, not added on top of it.
        start = self._deadline if 0.0 <= now - self._deadline < BACK_TO_BACK_S else now
        self._deadline = start + self.step_time(batch)
        tokens = [self.sample_or_error(seq) for seq in batch.sampling]
        self._deadline = await self.device.run_until(self._deadline)
        return tokens


def create(options: ExecutorOptions) -> SimExecutor:
    """The executor factory's entry for `--engine sim`."""
    return SimExecutor(CostModel().scaled(options.sim_time_scale, options.sim_jitter), options.seed)
