"""The generator's verdict on itself: saturated, its reason naming only the figures over their limits;
reads counted, late ones and what the network batched alike, never a flag of their own."""

from __future__ import annotations

from loadtests.record import RequestRecord
from loadtests.selfwatch import (
    CPU_LIMIT,
    CPU_MIN_SAMPLES,
    LAG_LIMIT_S,
    LAG_MIN_SAMPLES,
    SelfWatch,
    verdict,
)


def samples(cpu: float = 0.5, lag: float = 0.001, reads: int = 0, coalesced: int = 0, late: int = 0) -> dict:
    return {"cpu": [cpu] * 10, "lags": [lag] * 100, "reads": reads, "coalesced": coalesced, "late": late}


def test_a_healthy_generator_is_valid_and_its_reads_are_summed():
    v = verdict({"w1": samples(reads=5000, coalesced=10, late=2), "w2": samples(reads=3000, coalesced=5)})
    assert v["flags"] == []
    assert v["reasons"] == []
    assert v["reads"] == {"reads": 8000, "coalesced": 15, "late": 2, "phases": []}
    assert v["processes"]["w1"]["coalesced_reads"] == 10


def test_reads_the_network_batched_are_no_flag_however_many():
    # defect 4 of issue 18: a proxy's hold had an idle generator flagged for 2.7 % coalesced reads
    v = verdict({"local": samples(cpu=0.04, reads=4000, coalesced=4000 * 27 // 1000, late=0)})
    assert v["flags"] == []


def test_late_reads_are_counted_and_no_flag_of_their_own():
    # 50 % of reads late: what they cost is the error bar they leave on TTFT and ITL (llmchaos/bounds.py)
    v = verdict({"late": samples(reads=2000, coalesced=1000, late=1000)})
    assert (v["flags"], v["reasons"]) == ([], [])
    assert v["processes"]["late"]["late_reads"] == 1000


def test_a_saturated_generator_names_only_the_figures_over_their_limits():
    v = verdict({"local": samples(cpu=CPU_LIMIT, lag=LAG_LIMIT_S * 2)})
    assert v["flags"] == ["generator_saturated:local"]
    assert v["reasons"] == [
        f"local: CPU {CPU_LIMIT:.2f} of a core (limit {CPU_LIMIT:g}), loop lag p95 40.0 ms (limit 20)"
    ]
    (lag_only,) = verdict({"local": samples(cpu=0.04, lag=LAG_LIMIT_S * 2)})["reasons"]
    assert lag_only == "local: loop lag p95 40.0 ms (limit 20)"  # not the CPU, under its limit
    (cpu_only,) = verdict({"local": samples(cpu=0.95, lag=0.0012)})["reasons"]
    assert cpu_only == "local: CPU 0.95 of a core (limit 0.9)"


def test_too_few_samples_judge_nothing():
    # defect 6 of issue 18: a 1-request replay was invalid for one loop lag sample of 160.8 ms
    few = {"cpu": [1.0] * (CPU_MIN_SAMPLES - 1), "lags": [0.1608] * (LAG_MIN_SAMPLES - 1)}
    v = verdict({"local": few})
    assert v["flags"] == []
    assert v["processes"]["local"]["loop_lag_samples"] == LAG_MIN_SAMPLES - 1
    assert v["unjudged"] == [  # said, not silent (a watch that died leaves none: defect 18 of issue 34)
        f"local: CPU ({CPU_MIN_SAMPLES - 1} samples, needs {CPU_MIN_SAMPLES}), "
        f"loop lag ({LAG_MIN_SAMPLES - 1} samples, needs {LAG_MIN_SAMPLES})"
    ]
    enough = {"cpu": [1.0] * CPU_MIN_SAMPLES, "lags": [0.1608] * LAG_MIN_SAMPLES}
    assert verdict({"local": enough})["flags"] == ["generator_saturated:local"]
    assert verdict({"local": enough})["unjudged"] == []


def test_samples_without_read_counts_still_judge_cpu_and_lag():
    assert verdict({"local": {"cpu": [0.1], "lags": [0.0]}})["reads"] == {
        "reads": 0,
        "coalesced": 0,
        "late": 0,
        "phases": [],
    }


def test_the_watch_counts_finished_requests_reads_per_phase_until_drained():
    watch = SelfWatch()
    for phase, reads, coalesced, late in (("baseline", 5, 1, 1), ("hold", 3, 2, 0), ("baseline", 4, 0, 0)):
        watch.count(
            RequestRecord(
                "en", "openai-chat", "t", phase=phase, reads=reads, coalesced_reads=coalesced, late_reads=late
            )
        )
    out = watch.drain()
    assert (out["reads"], out["coalesced"], out["late"]) == (12, 3, 1)
    assert out["phases"] == [["baseline", 9, 1, 1], ["hold", 3, 2, 0]]
    again = watch.drain()
    assert (again["reads"], again["coalesced"], again["late"], again["phases"]) == (0, 0, 0, [])
    # two drains merged as the master merges them: lists add up, phases summed in the verdict
    merged = {"cpu": [], "lags": [], "reads": 12, "coalesced": 3, "late": 1, "phases": out["phases"] * 2}
    assert verdict({"w": merged})["reads"]["phases"] == [
        {"phase": "baseline", "reads": 18, "coalesced": 2, "late": 2},
        {"phase": "hold", "reads": 6, "coalesced": 4, "late": 0},
    ]
