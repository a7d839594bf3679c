"""The sim's board energy (reference_server/executors/power.py, and SimDevice's steps drawing it) on a
fake clock: steps of known batches at known clocks give exactly so many joules."""

import asyncio

import pytest

from reference_server.executors import sim
from reference_server.executors.power import PowerMeter
from reference_server.executors.sim import SimDevice, SimExecutor
from reference_server.profile import Power, StepModel
from tests.unit.reference_server.executors.test_sim import _step

# 100 W idle; a step adds 400 W x tokens/100 (exponent 1) x (clock ratio)^2: 50 tokens at the max
# clock draw 300 W, at half of it 150 W.
MODEL = Power(
    idle_w=100, dynamic_w=400, board_limit_w=500, full_batch_tokens=100, occupancy_exponent=1, clock_exponent=2
)


class FakeClock:
    """time.monotonic for the sim module: `t`, moved on by `tick` at every reading."""

    def __init__(self, t: float = 0.0, tick: float = 0.0) -> None:
        self.t, self.tick = t, tick

    def monotonic(self) -> float:
        now = self.t
        self.t += self.tick
        return now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(sim, "time", fake)
    return fake


def test_a_batch_occupies_the_board_in_proportion_to_its_tokens_up_to_a_full_batch():
    assert MODEL.occupancy(50) == 0.5
    assert MODEL.occupancy(100) == MODEL.occupancy(1000) == 1.0
    assert MODEL.step_w(100, 1.0) == MODEL.idle_w + MODEL.dynamic_w == 500.0
    assert MODEL.step_w(50, 1.0) == 300.0
    assert MODEL.step_w(50, 0.5) == 150.0


def test_known_steps_at_known_clocks_give_exactly_their_joules():
    meter = PowerMeter(MODEL, 0.0)
    meter.run(50, 1.0, 1.0, 3.0)  # idle 0-1 s (100 J), 300 W for 2 s (600 J)
    meter.run(100, 0.5, 3.0, 4.0)  # back to back: 100 + 400 x 1 x 0.25 = 200 W for 1 s (200 J)
    meter.run(0, 1.0, 5.0, 5.0)  # idle 4-5 s (100 J), a step of no time
    assert meter.energy_mj(6.0) == pytest.approx(1_000_000 + 100_000)  # and idle to 6 s
    assert meter.power_w(5.0) == meter.power_w(6.0) == 100.0


def test_a_clock_change_mid_step_draws_the_new_power_from_that_moment():
    meter = PowerMeter(MODEL, 0.0)
    meter.run(50, 1.0, 0.0, 1.0)  # 300 W, due at 1 s
    assert meter.power_w(0.25) == 300.0
    meter.run(50, 0.5, 0.25, 1.75)  # locked to half at 0.25 s: 150 W, the rest rescaled to end at 1.75 s
    assert meter.power_w(0.5) == pytest.approx((300 + 150) / 2)  # the last second's (here: since the start)
    assert meter.energy_mj(1.75) == pytest.approx(1000 * (300 * 0.25 + 150 * 1.5))
    assert meter.power_w(1.75) == pytest.approx(150.0)


def test_a_power_reading_is_the_average_over_the_last_second_as_nvmls_on_an_h100():
    meter = PowerMeter(MODEL, 0.0)
    for i in range(100):  # 10 ms steps back to back for a second, then idle
        meter.run(50, 1.0, i / 100, (i + 1) / 100)
    assert meter.power_w(1.0) == pytest.approx(300.0)
    assert meter.power_w(1.5) == pytest.approx((300 + 100) / 2)
    assert meter.power_w(2.0) == pytest.approx(100.0)
    assert meter.energy_mj(3.0) == pytest.approx(1000 * (300 + 2 * 100))  # what it drops is only readings'


def test_a_reading_never_falls_however_late_a_step_is_recorded():
    """The engine records a step when it runs it, which may be after its start (catching up): a
    reading taken meanwhile counted idle power there, the ones after count the step's."""
    meter = PowerMeter(MODEL, 0.0)
    before = meter.energy_mj(2.0)
    meter.run(50, 1.0, 1.5, 3.0)
    assert meter.energy_mj(2.0) >= before
    assert meter.energy_mj(3.0) == pytest.approx(1000 * (100 * 1.5 + 300 * 1.5))


def test_steps_on_the_device_draw_their_power_until_each_deadline(clock: FakeClock):
    device = SimDevice(1980.0, 210.0, MODEL)
    meter = device.meter
    assert meter is not None

    async def steps() -> None:
        clock.t = 3.0  # each step already due when it runs: no waiting
        await device.run_until(2.0, start=1.0, tokens=50)  # 300 W for 1 s
        device.lock(990.0)
        await device.run_until(3.0, start=2.0, tokens=100)  # 200 W for 1 s

    asyncio.run(steps())
    assert meter.energy_mj(4.0) == pytest.approx(1000 * (100 + 300 + 200 + 100))


def test_a_lock_in_the_middle_of_a_step_on_the_device_changes_its_power_and_its_end(clock: FakeClock):
    """300 W from 0 s; locked to half the clock at 0.25 s, the rest (0.75 s of math) takes 1.5 s at
    150 W; the step then ends at 1.75 s. The clock is locked again at the same value at 1.75 s, which
    wakes the sleeping step at its (fake) deadline."""
    device = SimDevice(1980.0, 210.0, MODEL)
    meter = device.meter
    assert meter is not None

    async def go() -> float:
        step = asyncio.create_task(device.run_until(1.0, start=0.0, tokens=50))
        await asyncio.sleep(0)
        clock.t = 0.25
        device.lock(990.0)
        await asyncio.sleep(0)
        clock.t = 1.75
        device.lock(990.0)
        return await step

    assert asyncio.run(go()) == pytest.approx(1.75)
    assert meter.energy_mj(1.75) == pytest.approx(1000 * (300 * 0.25 + 150 * 1.5))
    assert meter.energy_mj(2.75) == pytest.approx(1000 * (300 * 0.25 + 150 * 1.5 + 100))


def test_the_executor_draws_a_steps_power_for_its_prompt_and_decoded_tokens(monkeypatch: pytest.MonkeyPatch):
    """A step of "Hello" (its prompt tokens computed, none decoded) of 0.1 s: the clock moves on a
    second at every reading, so the step is already due when it runs."""
    monkeypatch.setattr(sim, "time", FakeClock(10.0, tick=1.0))
    executor = SimExecutor(StepModel(overhead=0.1), power=MODEL)
    meter = executor.device.meter
    assert meter is not None
    batch = _step(executor)
    for seq, _ in batch.items:
        seq.ready = 11.0  # the step begins at the engine's `now`
    asyncio.run(executor.execute(batch))
    tokens = batch.num_prefill_tokens + batch.num_decode_seqs
    assert tokens == batch.num_prefill_tokens > 0
    assert meter.energy_mj(11.1) - meter.energy_mj(11.0) == pytest.approx(100 * MODEL.step_w(tokens, 1.0))
