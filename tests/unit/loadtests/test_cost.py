"""The cost's attribution against ground truths: energy read at known times, tokens at known ticks."""

import math
from collections import Counter

import pytest

from loadtests.collector import TICKS_PER_S, Collector
from loadtests.energy.attribute import MAX_BLOCKS, Prices, attribute
from loadtests.energy.readings import Readings, cumulative
from loadtests.record import RequestRecord

EN = ("t", "en", "openai-chat", "baseline")
DE = ("t", "de", "openai-chat", "baseline")
LOCK = ("t", "en", "openai-chat", "lock")


def tick(t: float) -> int:
    return math.floor(t * TICKS_PER_S)


def watts(w: float, times: list[float]) -> Readings:
    """One GPU drawing a constant `w` watts, read at `times`."""
    return Readings("test", {"GPU-0": [(t, w * (t - times[0])) for t in times]}, method="counter")


def test_each_interval_is_shared_by_the_tokens_produced_in_it():
    # 100 W read at 0, 10, 20 s: 1000 J each interval. en makes 30 tokens in the first, de 10;
    # in the second en alone makes 50.
    tally = Counter({(*EN, tick(1.0)): 30, (*DE, tick(5.0)): 10, (*EN, tick(15.0)): 50})
    rows, energy = attribute(watts(100, [0, 10, 20]), tally, Counter({EN: 2, DE: 1}), Prices(per_gpu_hour=3.6), 0, 20)
    by = {(r.lang, r.phase): r for r in rows}
    assert by["en", "baseline"].energy_j == pytest.approx(750 + 1000)
    assert by["de", "baseline"].energy_j == pytest.approx(250)
    assert by["en", "baseline"].j_per_token == pytest.approx(1750 / 80)
    assert by["en", "baseline"].j_per_request == pytest.approx(1750 / 2)
    # GPU time: 10 s x 3/4 + 10 s = 17.5 GPU-s at $3.6/h = $0.0175, over 80 tokens
    assert by["en", "baseline"].usd_per_mtok == pytest.approx(17.5 / 3600 * 3.6 / 80 * 1e6)
    assert energy.energy_j == pytest.approx(2000)
    assert energy.unattributed_j == 0
    assert sum(b.energy_j for b in energy.blocks) == pytest.approx(2000)
    assert {r.source for r in rows} == {"measured"}


def test_an_interval_without_tokens_is_no_ones_and_the_intervals_at_the_runs_ends_count_whole():
    # read at -5, 10, 25 and 40 s; the run is 0..20 s: the intervals -5..10 and 10..25 straddle
    # its ends and count whole (3000 J), 25..40 is past it; tokens only in -5..10
    tally = Counter({(*EN, tick(2.0)): 40})
    rows, energy = attribute(watts(100, [-5, 10, 25, 40]), tally, Counter({EN: 1}), Prices(), 0, 20)
    assert energy.covered == (-5, 25)
    assert energy.energy_j == pytest.approx(3000)
    assert rows[0].energy_j == pytest.approx(1500)
    assert energy.unattributed_j == pytest.approx(1500)
    assert rows[0].usd is None
    assert rows[0].usd_per_mtok is None  # no price given


def test_a_tick_straddling_a_reading_is_split_evenly_over_it():
    # a reading at 10.05 s, inside the tick [10.0, 10.1): its 10 tokens go half to each side
    tally = Counter({(*EN, tick(10.0)): 10, (*LOCK, tick(15.0)): 10})
    _, energy = attribute(watts(100, [0, 10.05, 20]), tally, Counter({EN: 1, LOCK: 1}), Prices(), 0, 20)
    first = [b for b in energy.blocks if b.end == pytest.approx(10.05)]
    assert [b.tokens for b in first] == [pytest.approx(5)]
    second = {b.phase: b.tokens for b in energy.blocks if b.start == pytest.approx(10.05)}
    assert second == {"baseline": pytest.approx(5), "lock": pytest.approx(10)}


def test_several_gpus_add_and_a_counter_reset_is_no_negative_energy():
    times = [0.0, 5.0, 10.0]
    reset = [(0.0, 5_000_000.0), (5.0, 5_500_000.0), (10.0, 400_000.0)]  # mJ: +500 J, then a reset: +400 J
    readings = Readings("test", {"a": [(t, 100 * t) for t in times], "b": cumulative(reset)}, method="counter")
    rows, energy = attribute(
        readings, Counter({(*EN, tick(1.0)): 10, (*EN, tick(6.0)): 10}), Counter({EN: 1}), Prices(per_kwh=0.36), 0, 10
    )
    assert energy.energy_j == pytest.approx(1000 + 900)
    assert rows[0].gpu_s == pytest.approx(20)  # two GPUs for 10 s
    assert rows[0].usd == pytest.approx(1900 / 3.6e6 * 0.36)


def test_no_readings_is_absent_with_its_reason_never_zero():
    rows, energy = attribute(
        Readings("http://x", why="no series"), Counter({(*EN, 5): 7}), Counter({EN: 1}), Prices(per_gpu_hour=2.0), 0, 10
    )
    assert energy.source == "absent"
    assert energy.why == "no series"
    assert rows[0].source == "absent"
    assert rows[0].j_per_token is None
    assert rows[0].usd_per_mtok is None
    assert rows[0].tokens == 7
    assert rows[0].why == "no series"


def test_a_modelled_gpu_says_so():
    readings = watts(100, [0, 10])
    readings.modelled = True
    rows, energy = attribute(readings, Counter({(*EN, 3): 1}), Counter({EN: 1}), Prices(), 0, 10)
    assert energy.source == rows[0].source == "modelled"


def test_the_collector_tallies_each_event_s_tokens_at_its_time():
    c = Collector({}, seed=0)
    rec = RequestRecord(
        "en", "openai-chat", "t", intended=100.0, ttft=0.5, usage_tokens=6, chunks=["a", "b", "c"], gaps=[0.25, 0.3]
    )
    c.add(rec)
    per = rec.tokens_per_chunk()
    assert c.tokens == Counter({(*EN, tick(100.5)): per[0], (*EN, tick(100.75)): per[1], (*EN, tick(101.05)): per[2]})
    assert c.produced == Counter({EN: 1})
    assert sum(c.tokens.values()) == rec.output_tokens


def test_a_long_runs_blocks_are_merged_to_at_most_max_blocks_and_add_up_the_same():
    # a reading every second for 5,000 s, en making a token in each: 5,000 intervals, 2,000 blocks
    times = [float(t) for t in range(5001)]
    tally = Counter({(*EN, tick(t + 0.5)): 1 for t in range(5000)})
    rows, energy = attribute(watts(100, times), tally, Counter({EN: 5000}), Prices(), 0, 5000)
    assert len(energy.blocks) == MAX_BLOCKS
    assert sum(b.energy_j for b in energy.blocks) == pytest.approx(500_000)
    assert sum(b.tokens for b in energy.blocks) == pytest.approx(5000)
    assert rows[0].j_per_token == pytest.approx(100)
    assert energy.blocks[0].start == 0
    assert energy.blocks[-1].end == 5000
