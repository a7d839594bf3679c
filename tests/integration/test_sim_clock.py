"""The sim executor's steps on the wall clock (reference_server/executors/sim.py): a step follows the
clock when it changes in the middle of it, and a step's deadline holds whatever the event loop does
(its clock limits and the steps that need no waiting: tests/unit/reference_server/executors/test_sim.py)."""

import asyncio
import time

import pytest

from reference_server.executors.sim import CATCH_UP_S, SimDevice, SimExecutor
from reference_server.profile import StepModel
from tests.unit.reference_server.executors.test_sim import _step


def math_of(seconds: float) -> StepModel:
    """A step model under which `_step`'s batch is `seconds` of math alone (all of it clocked)."""
    return StepModel(prefill_token=seconds / _step(SimExecutor(StepModel())).num_prefill_tokens)


@pytest.mark.timing
def test_a_step_at_a_locked_clock_ends_soon_after_the_reset():
    """A step scheduled at the lowest clock must not keep its long deadline once the clock is reset:
    the rest of its work runs at full speed (the engine stayed stuck after DELETE). It then ends by
    the reset plus its full-speed work (0.2 s) plus a late wake; kept, the deadline would be 1.9 s
    away. The bound is halfway between the two, counted from when the reset really happened."""
    work = 0.2
    executor = SimExecutor(math_of(work))
    executor.device.lock(210.0)
    locked_step = executor.step_time(_step(executor))
    assert locked_step == pytest.approx(work * 1980 / 210)
    executor.model("en")  # built once, not inside the timed step

    async def go() -> tuple[float, float]:
        t0 = time.monotonic()
        step = asyncio.create_task(executor.execute(_step(executor)))
        await asyncio.sleep(0.05)
        reset_at = time.monotonic() - t0
        executor.device.reset()
        await step
        return reset_at, time.monotonic() - t0

    reset_at, took = asyncio.run(go())
    assert took < (reset_at + work + locked_step) / 2, (took, reset_at, locked_step)


@pytest.mark.timing
def test_a_step_slows_when_the_clock_is_locked_in_the_middle_of_it():
    """The clock halves at a moment the test reads itself (not at the one it asked for: a busy loop
    wakes late). Work done before it ran at full speed, the rest at half, so the step cannot end
    before 2 x free_step - (done before the lock). A step that ignored the lock would end at free_step.
    The lock must land with at least a quarter of the work left, or the two are too close to tell:
    on a machine too busy for that the step is tried again."""
    executor = SimExecutor(math_of(0.1))
    free_step = executor.step_time(_step(executor))
    executor.model("en")  # built once, not inside a timed step

    async def go() -> tuple[float, float]:
        executor.device.reset()  # a step counts from its batch's arrival, made after the last step ended
        t0 = time.monotonic()
        step = asyncio.create_task(executor.execute(_step(executor)))
        await asyncio.sleep(free_step / 4)
        before_lock = time.monotonic() - t0  # at most this much work done at full speed
        executor.device.lock(990.0)  # half the speed for the rest of the work
        await step
        return before_lock, time.monotonic() - t0

    for _ in range(20):
        before_lock, took = asyncio.run(go())
        if before_lock < 0.75 * free_step:
            break
    else:
        pytest.fail("the loop never woke with a quarter of the step left")
    assert took >= 2 * free_step - before_lock, (took, before_lock, free_step)


def test_a_step_woken_late_still_ended_at_its_deadline():
    """The next step counts from the deadline, not from when the event loop came back (on a busy
    machine every step's lateness had added up: 8.8 ms a token where the model said 7.4)."""
    device = SimDevice(1980.0, 210.0)

    async def go() -> tuple[float, float]:
        deadline = time.monotonic() + 0.01
        time.sleep(0.03)  # the loop is busy past the deadline
        return deadline, await device.run_until(deadline)

    deadline, met = asyncio.run(go())
    assert met == deadline


@pytest.mark.timing  # a loop held past CATCH_UP_S (50 ms) by the suite's own load may, by design, lose it
def test_steps_back_to_back_follow_each_other_whatever_the_loop_does_between_them():
    """A busy CPU between two steps delays neither: the second begins where the first ended (so long
    as the loop comes back within CATCH_UP_S: one whole make test held it 51 ms once)."""
    step = StepModel(overhead=0.004, memory=0.003, decode_token=1e-4)
    executor = SimExecutor(step)
    executor.model("en")  # built once, on the first step, else: tens of ms

    async def go() -> list[float]:
        deadlines = []
        batch = _step(executor)
        for _ in range(3):
            await executor.execute(batch)
            deadlines.append(executor._deadline)
            time.sleep(0.005)  # the engine's own work, on a slow machine
        return deadlines

    d = asyncio.run(go())
    took = step.time(batch_prefill := _step(executor).num_prefill_tokens, 0, batch_prefill)
    assert d[1] - d[0] == pytest.approx(took)
    assert d[2] - d[1] == pytest.approx(took)


def test_a_step_further_behind_than_it_may_catch_up_counts_its_lost_time():
    """Past CATCH_UP_S behind, the model time is lost (a paused server stays paused) and counted, so
    /metrics says when the stand-in is not keeping to its profile (a machine too busy for the load)."""
    executor = SimExecutor(StepModel(overhead=0.01))
    executor.model("en")

    async def go() -> float:
        await executor.execute(_step(executor))
        ended = executor._deadline
        time.sleep(0.1)  # the loop comes back much later than the next step was due
        batch = _step(executor)
        for seq, _ in batch.items:
            seq.ready = 0.0  # work that was there all along: the step was due at the last deadline
        before = time.monotonic()
        await executor.execute(batch)
        return before - CATCH_UP_S - ended

    at_least = asyncio.run(go())
    assert at_least > 0.0
    assert executor.late_s >= at_least
