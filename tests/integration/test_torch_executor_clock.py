"""The torch executor's steps on the wall clock (reference_server/executors/torch/executor.py): a locked
simulated clock stretches CPU steps in proportion, and a step computes off the event loop (its tokens
and blocks: tests/unit/reference_server/executors/torch/test_executor.py)."""

import asyncio
import statistics
import time

import pytest

from reference_server.batch import Batch
from reference_server.sequence import Sequence, Status
from tests.unit.reference_server.executors.torch import conftest as torch_fixtures
from tests.unit.reference_server.executors.torch.test_executor import GREEDY

tiny = torch_fixtures.tiny  # the fixture: one tiny model for the session
make_executor, prompt = torch_fixtures.make_executor, torch_fixtures.prompt


def _prefills(lang: str, n: int, tokens: int) -> Batch:
    """A step of `n` whole prefills of `tokens` tokens each, each in its own blocks."""
    batch, blocks = Batch(), -(-tokens // 16)
    for i in range(n):
        seq = Sequence(prompt(lang, tokens, 100 * i), GREEDY)
        seq.block_table = list(range(blocks * i, blocks * (i + 1)))
        seq.status = Status.RUNNING
        batch.add(seq, tokens)
    return batch


async def _step_seconds(executor, batch: Batch) -> float:
    start = time.monotonic()
    await executor.execute(batch)
    return time.monotonic() - start


@pytest.mark.timing
@pytest.mark.parametrize("mhz", [990.0, 495.0])
def test_a_locked_simulated_clock_stretches_cpu_steps_in_proportion(tiny, mhz):
    """The same step, alternately at full clock and locked (so that the machine's other load falls on both)."""
    executor = make_executor(tiny, num_blocks=256)
    batch = _prefills("en", 8, 200)

    async def main() -> tuple[list[float], list[float]]:
        free, locked = [], []
        for _ in range(7):
            free.append(await _step_seconds(executor, batch))
            executor.device.lock(mhz)
            locked.append(await _step_seconds(executor, batch))
            executor.device.reset()
        return free, locked

    free, locked = asyncio.run(main())
    ratio = statistics.median(locked) / statistics.median(free)
    slowdown = 1980.0 / mhz
    assert 0.7 * slowdown < ratio < 1.4 * slowdown, (free, locked)


@pytest.mark.timing
def test_a_step_runs_off_the_event_loop(tiny):
    """A long prefill step computes in the executor's thread: the event loop goes on meanwhile."""
    executor = make_executor(tiny, num_blocks=600)
    batch = _prefills("de", 4, 2000)

    async def main() -> tuple[int, float]:
        ticks, stop = 0, asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                await asyncio.sleep(0.001)
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = time.monotonic()
        await executor.execute(batch)
        took = time.monotonic() - start
        stop.set()
        await task
        return ticks, took

    ticks, took = asyncio.run(main())
    assert took > 0.05  # a step long enough for the loop to tick many times, were it free
    assert ticks >= 10, (ticks, took)
