"""The sim executor: a profile's step-time model on a simulated device, and an n-gram sampler.

Each step sleeps for the model's time (prefill tokens, decode tokens, context attended) at the
device's clock, times a seeded jitter, plus the model's wake when it finds the engine idle;
consecutive steps run deadline to deadline so error never accumulates. A request waits the model's
frontend time before the scheduler sees it. The device draws the profile's power model's watts, idle
between steps and the step's own from its start to its deadline, and counts the energy.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable

from llmchaos import languages
from reference_server.batch import Batch
from reference_server.executors import ExecutorOptions, Sampled
from reference_server.executors.ngram import NGramModel
from reference_server.executors.power import PowerMeter
from reference_server.profile import H100_CLOCKS, H100_NAME, Power, StepModel
from reference_server.sequence import Sequence

CATCH_UP_S = 0.05  # a step begins at most this long before the engine runs it (a CPU hiccup, not a pause)


class SimDevice:
    """A GPU whose graphics clock can be locked within its range, like `nvidia-smi -lgc`.

    A step in progress follows the clock: when it changes, the rest of the step's work runs at
    the new clock (a reset wakes a step scheduled at the lowest one), and with a power model, at the
    new clock's power."""

    def __init__(self, max_clock_mhz: float, min_clock_mhz: float, power: Power | None = None) -> None:
        self.max_clock_mhz, self.min_clock_mhz = max_clock_mhz, min_clock_mhz
        self.locked_mhz: float | None = None
        self._waiter: asyncio.Future[None] | None = None  # the step sleeping on this clock
        self.meter = PowerMeter(power, time.monotonic()) if power is not None else None

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

    async def run_until(
        self, deadline: float, cost: Callable[[float], float] | None = None, start: float | None = None, tokens: int = 0
    ) -> float:
        """Sleep until `deadline` (time.monotonic) at the current clock. `cost(slowdown)` is the step's
        time at a slowdown (default: in proportion); when the clock changes meanwhile, the rest of the
        step moves by the ratio of its cost at the new clock to that at the old. Returns the deadline
        met. A step already due still yields once, so that a free engine never starves the loop.
        Given its `start`, the step draws its power (`tokens`: prompt tokens computed and decoded) until
        the deadline met."""
        loop, cost = asyncio.get_running_loop(), cost or _proportional
        if start is not None:
            self._draw(start, deadline, tokens)
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
            if deadline > now and (before := cost(slowdown)):  # woken early by a clock change: rescale the rest
                deadline = now + (deadline - now) * cost(self.slowdown) / before
                if start is not None:
                    self._draw(now, deadline, tokens)
        return deadline  # woken late, the step still ended at its deadline: the next one counts from it

    def _draw(self, start: float, end: float, tokens: int) -> None:
        if self.meter is not None:
            self.meter.run(tokens, 1 / self.slowdown, start, end)

    @property
    def clock_mhz(self) -> float:
        return self.locked_mhz or self.max_clock_mhz

    @property
    def slowdown(self) -> float:
        return self.max_clock_mhz / self.clock_mhz


def _proportional(slowdown: float) -> float:
    return slowdown


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class SimExecutor:
    def __init__(
        self,
        step: StepModel,
        seed: int = 0,
        clocks: tuple[float, float] = H100_CLOCKS,
        power: Power | None = None,
        profile: str = "custom",
        gpu_name: str = H100_NAME,
    ) -> None:
        self.step = step
        self.device = SimDevice(*clocks, power or Power())
        self.power_model, self.gpu_name = profile, gpu_name  # what its modelled GPU telemetry says it is
        self.rng = random.Random(seed)
        self._jitter_rng = random.Random(seed ^ 0x5EED)
        self._frontend_rng = random.Random(seed ^ 0xF0E)
        self._models: dict[str, NGramModel] = {}
        self._deadline = float("-inf")
        self.late_s = 0.0  # model time lost: steps the engine ran more than CATCH_UP_S behind the model

    def model(self, lang: str) -> NGramModel:
        if lang not in self._models:
            self._models[lang] = NGramModel(languages.get(lang).paragraphs())
        return self._models[lang]

    def admission_delay(self) -> float:
        """How long a request just received takes to reach the scheduler (the API server's share)."""
        s = self.step
        return (
            s.frontend * math.exp(self._frontend_rng.gauss(0.0, s.frontend_sigma)) if s.frontend_sigma else s.frontend
        )

    def cost(self, batch: Batch) -> Callable[[float], float]:
        """The batch's step time at a clock slowdown, its jitter drawn once."""
        s, b = self.step, (batch.num_prefill_tokens, batch.num_decode_seqs, batch.num_context_tokens)
        factor = math.exp(self._jitter_rng.gauss(0.0, s.jitter)) if s.jitter else 1.0
        return lambda slowdown: s.time(*b, slowdown) * factor

    def step_time(self, batch: Batch) -> float:
        """The batch's step time at the device's clock now."""
        return self.cost(batch)(self.device.slowdown)

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
        # A step begins when the last one ended or when its work was there, whichever is later, so the
        # engine's own work between steps, and the event loop coming back late (a busy CPU), are inside
        # the modelled times rather than added to them; by at most CATCH_UP_S (a paused server is paused).
        now = time.monotonic()
        ready = min(seq.ready for seq, _ in batch.items)
        due = max(self._deadline, ready)
        self.late_s += max(0.0, now - CATCH_UP_S - due)
        start = min(max(due, now - CATCH_UP_S), now)
        cost = self.cost(batch)
        wake = self.step.wake if ready > self._deadline else 0.0  # its work came to an idle engine
        self._deadline = start + wake + cost(self.device.slowdown)
        tokens = [self.sample_or_error(seq) for seq in batch.sampling]
        computed = batch.num_prefill_tokens + batch.num_decode_seqs
        self._deadline = await self.device.run_until(self._deadline, cost, start, computed)
        return tokens


def create(options: ExecutorOptions) -> SimExecutor:
    """The executor factory's entry for `--engine sim`."""
    return SimExecutor(options.step, options.seed, options.clocks, options.power, options.profile, options.gpu_name)
