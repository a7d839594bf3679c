"""The generator's verdict on itself: saturated, or reads coalesced, each flag with its reason."""

from __future__ import annotations

from loadtests.record import RequestRecord
from loadtests.selfwatch import COALESCED_LIMIT, COALESCED_MIN_READS, CPU_LIMIT, LAG_LIMIT_S, SelfWatch, verdict


def samples(cpu: float = 0.5, lag: float = 0.001, reads: int = 0, coalesced: int = 0) -> dict:
    return {"cpu": [cpu] * 10, "lags": [lag] * 100, "reads": reads, "coalesced": coalesced}


def test_a_healthy_generator_is_valid_and_its_reads_are_summed():
    v = verdict({"w1": samples(reads=5000, coalesced=10), "w2": samples(reads=3000, coalesced=5)})
    assert v["flags"] == []
    assert v["reasons"] == []
    assert v["reads"] == {"reads": 8000, "coalesced": 15}
    assert v["processes"]["w1"]["coalesced_reads"] == 10


def test_reads_coalesced_beyond_the_limit_are_flagged_with_the_share():
    n = COALESCED_MIN_READS * 2
    just_under = int(n * COALESCED_LIMIT) - 1
    v = verdict({"ok": samples(reads=n, coalesced=just_under), "late": samples(reads=n, coalesced=n // 2)})
    assert v["flags"] == ["reads_coalesced:late"]
    assert v["reasons"] == [
        f"late: 50.0 % of stream reads brought several events under one stamp "
        f"({n // 2} of {n}; limit {100 * COALESCED_LIMIT:g} %)"
    ]


def test_too_few_reads_to_judge_a_share_by_are_not_flagged():
    assert verdict({"local": samples(reads=COALESCED_MIN_READS - 1, coalesced=COALESCED_MIN_READS - 1)})["flags"] == []


def test_a_saturated_generator_says_its_cpu_and_loop_lag():
    v = verdict({"local": samples(cpu=CPU_LIMIT, lag=LAG_LIMIT_S * 2)})
    assert v["flags"] == ["generator_saturated:local"]
    assert f"CPU {CPU_LIMIT:.2f} of a core" in v["reasons"][0]
    assert f"p95 {LAG_LIMIT_S * 2000:.1f} ms" in v["reasons"][0]


def test_samples_without_read_counts_still_judge_cpu_and_lag():
    assert verdict({"local": {"cpu": [0.1], "lags": [0.0]}})["reads"] == {"reads": 0, "coalesced": 0}


def test_the_watch_counts_finished_requests_reads_until_drained():
    watch = SelfWatch()
    for reads, coalesced in ((5, 1), (3, 0)):
        watch.count(RequestRecord("en", "openai-chat", "t", reads=reads, coalesced_reads=coalesced))
    assert watch.drain() | {"cpu": [], "lags": []} == {"cpu": [], "lags": [], "reads": 8, "coalesced": 1}
    assert (watch.drain()["reads"], watch.drain()["coalesced"]) == (0, 0)
