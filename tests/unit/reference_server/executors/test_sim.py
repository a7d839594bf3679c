"""The sim executor's device (reference_server/executors/sim.py): clock limits, and a step that
follows the clock when it changes in the middle of it."""

import asyncio
import math
import time

import pytest

from llmchaos import tokenizer
from reference_server.batch import Batch
from reference_server.executors.sim import SimDevice, SimExecutor
from reference_server.profile import StepModel
from reference_server.sequence import SamplingParams, Sequence


@pytest.mark.parametrize("mhz", [1e-300, 0, -5, 209.9, 1980.1, 5000, math.inf, math.nan])
def test_clocks_outside_the_device_range_are_refused(mhz):
    device = SimDevice(1980.0, 210.0)
    with pytest.raises(ValueError, match=r"\[210, 1980\]"):
        device.lock(mhz)
    assert device.locked_mhz is None


@pytest.mark.parametrize("mhz", [210, 990, 1980])
def test_clocks_inside_the_range_lock(mhz):
    device = SimDevice(1980.0, 210.0)
    device.lock(mhz)
    assert device.clock_mhz == mhz
    assert device.slowdown == 1980.0 / mhz


def _step(executor: SimExecutor) -> Batch:
    seq = Sequence(tokenizer.encode("Hello"), SamplingParams(max_tokens=4))
    batch = Batch()
    batch.add(seq, seq.num_uncomputed_tokens)
    return batch


def test_a_free_step_still_lets_the_event_loop_run():
    """With --sim-time-scale 0 every step is due at once; each must still yield, or the engine loop
    would starve the HTTP handlers while it has work."""
    executor = SimExecutor(StepModel())

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


def test_a_step_after_an_idle_engine_begins_when_its_work_was_ready():
    executor = SimExecutor(StepModel(overhead=0.01))

    async def go() -> tuple[float, float]:
        batch = _step(executor)
        ready = time.monotonic() - 0.02  # the engine noticed it 20 ms late
        for seq, _ in batch.items:
            seq.ready = ready
        await executor.execute(batch)
        return ready, executor._deadline

    ready, deadline = asyncio.run(go())
    assert deadline == pytest.approx(ready + 0.01)
