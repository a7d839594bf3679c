"""The sim executor's device (reference_server/executors/sim.py): clock limits, and a step that
follows the clock when it changes in the middle of it."""

import asyncio
import math
import time

import pytest

from llmchaos import tokenizer
from reference_server.batch import Batch
from reference_server.executors.sim import CostModel, SimDevice, SimExecutor
from reference_server.sequence import SamplingParams, Sequence


@pytest.mark.parametrize("mhz", [1e-300, 0, -5, 209.9, 1980.1, 5000, math.inf, math.nan])
def test_clocks_outside_the_device_range_are_refused(mhz):
    device = SimDevice(1980.0)
    with pytest.raises(ValueError, match=r"\[210, 1980\]"):
        device.lock(mhz)
    assert device.locked_mhz is None


@pytest.mark.parametrize("mhz", [210, 990, 1980])
def test_clocks_inside_the_range_lock(mhz):
    device = SimDevice(1980.0)
    device.lock(mhz)
    assert device.clock_mhz == mhz
    assert device.slowdown == 1980.0 / mhz


def _step(executor: SimExecutor) -> Batch:
    seq = Sequence(tokenizer.encode("Hello"), SamplingParams(max_tokens=4))
    batch = Batch()
    batch.add(seq, seq.num_uncomputed_tokens)
    return batch


def test_a_step_at_a_locked_clock_ends_soon_after_the_reset():
    """A step scheduled at the lowest clock must not keep its long deadline once the clock is reset:
    the rest of its work runs at full speed (the engine stayed stuck after DELETE)."""
    executor = SimExecutor(CostModel(step_overhead_s=0.2, prefill_per_token_s=0.0, jitter=0.0))
    executor.device.lock(210.0)
    locked_step = executor.step_time(_step(executor))
    assert locked_step == pytest.approx(0.2 * 1980 / 210)

    async def go() -> float:
        t0 = time.monotonic()
        step = asyncio.create_task(executor.execute(_step(executor)))
        await asyncio.sleep(0.05)
        executor.device.reset()
        await asyncio.wait_for(step, locked_step / 2)
        return time.monotonic() - t0

    took = asyncio.run(go())
    # 0.05 s at 1/9.4 of the speed did 0.005 s of the step's 0.2 s of work; the rest took ~0.195 s.
    assert took < locked_step / 4, (took, locked_step)


def test_a_step_slows_when_the_clock_is_locked_in_the_middle_of_it():
    executor = SimExecutor(CostModel(step_overhead_s=0.1, prefill_per_token_s=0.0, jitter=0.0))
    free_step = executor.step_time(_step(executor))

    async def go() -> float:
        t0 = time.monotonic()
        step = asyncio.create_task(executor.execute(_step(executor)))
        await asyncio.sleep(free_step / 2)
        executor.device.lock(990.0)  # half the speed for the second half of the work
        await step
        return time.monotonic() - t0

    assert asyncio.run(go()) > free_step * 1.3


def test_a_free_step_still_lets_the_event_loop_run():
    """With --sim-time-scale 0 every step is due at once; each must still yield, or the engine loop
    would starve the HTTP handlers while it has work."""
    executor = SimExecutor(CostModel.zero())

    async def go() -> int:
        ticks = 0

        async def other() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        before = ticks
        for _ in range(10):
            await executor.execute(_step(executor))
        task.cancel()
        return ticks - before

    assert asyncio.run(go()) >= 10
