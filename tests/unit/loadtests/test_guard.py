"""The live guard's rules and windows, without Locust: its file read (defaults from the SLOs, every
bad field one error with its line), and each window's percentile cut exactly from the totals."""

import numpy as np
import pytest

from llmchaos import slo
from llmchaos.errors import UsageError
from llmchaos.histogram import Histogram, HistogramSet, Key
from loadtests import guard


def write(tmp_path, text: str) -> str:
    p = tmp_path / "guard.yaml"
    p.write_text(text)
    return str(p)


def test_defaults_are_every_language_slo_at_p95(tmp_path):
    config = guard.load(write(tmp_path, "window: 5s\n"), slo.load(None), ("en", "de"))
    assert config.window_s == 5.0
    assert config.windows == 3
    assert config.actions == {"record"}
    assert guard.Check("de", "ttft", 95.0, 130.0) in config.checks  # registry: de ttft_p99_ms = 130
    assert guard.Check("en", "itl", 95.0, 50.0) in config.checks
    assert {c.lang for c in config.checks} == {"en", "de"}


def test_rules_replace_the_defaults_and_star_means_every_language(tmp_path):
    text = "windows: 2\nactions: [stop]\nrules:\n  de: {ttft_p90_ms: 200}\n  '*': {itl_p99_ms: 80}\n"
    config = guard.load(write(tmp_path, text), slo.load(None), ("en", "de"))
    assert set(config.checks) == {
        guard.Check("de", "ttft", 90.0, 200.0),
        guard.Check("en", "itl", 99.0, 80.0),
        guard.Check("de", "itl", 99.0, 80.0),
    }
    assert config.actions == {"record", "stop"}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("windw: 3\n", "guard.yaml:1: windw: unknown field"),
        ("window: soon\n", "guard.yaml:1: window: bad duration"),
        ("windows: 0\n", "guard.yaml:1: windows: must be a whole number >= 1"),
        ("actions: [explode]\n", "guard.yaml:1: actions: must be a list of record, mark, webhook, stop"),
        ("actions: [webhook]\n", "guard.yaml: webhook: the webhook action needs an http(s) URL"),
        ("rules:\n  xx: {ttft_p95_ms: 1}\n", "guard.yaml:2: rules.xx: not a language of this run"),
        ("rules:\n  de: {ttft_fast: 1}\n", "guard.yaml:2: rules.de.ttft_fast: not a percentile threshold"),
        ("rules:\n  de: {ttft_p95_ms: -1}\n", "guard.yaml:2: rules.de.ttft_p95_ms: must be a positive number"),
    ],
)
def test_a_bad_guard_file_is_one_error_with_its_line(tmp_path, text, where):
    with pytest.raises(UsageError) as e:
        guard.load(write(tmp_path, text), slo.load(None), ("en", "de"))
    assert str(e.value).replace(str(tmp_path) + "/", "").startswith(where)


class Clock:
    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def record(hist: HistogramSet, lang: str, values: list[float], phase: str = "baseline") -> None:
    hist.record_many(Key("http://t", lang, "openai-chat", phase, "ttft"), values)


def test_each_window_is_the_totals_difference_and_trips_after_k_windows():
    hist, clock = HistogramSet(), Clock()
    config = guard.Config((guard.Check("de", "ttft", 95.0, 100.0), guard.Check("en", "ttft", 95.0, 100.0)), 1.0, 3)
    g = guard.Guard(config, "run", lambda: hist, lambda t: "slow" if t >= 2 else "baseline", clock.stop)
    fast, slow = [0.02] * 50, [0.3] * 50
    record(hist, "de", slow)  # window 0: de over (0.3 s), en under
    record(hist, "en", fast)
    g.tick(0, 1)
    record(hist, "de", slow)
    record(hist, "en", fast * 10)  # the totals now hold 500 fast: only the window's values count
    g.tick(1, 2)
    assert g.close() == []  # two windows over: not yet
    record(hist, "de", slow, "slow")
    g.tick(2, 3)
    (trip,) = g.close()
    assert (trip.lang, trip.metric, trip.percentile, trip.threshold_ms) == ("de", "ttft", 95.0, 100.0)
    assert trip.windows_ms == pytest.approx((300.0, 300.0, 300.0), rel=0.001)
    assert (trip.started, trip.tripped, trip.phase) == (0, 3, "slow")
    assert trip.actions == ("record",)
    assert clock.stopped == 0


def test_a_window_under_the_threshold_breaks_the_streak_and_stop_stops_once():
    hist, clock = HistogramSet(), Clock()
    config = guard.Config((guard.Check("de", "ttft", 50.0, 100.0),), 1.0, 2, frozenset({"record", "mark", "stop"}))
    g = guard.Guard(config, "run", lambda: hist, lambda t: "baseline", clock.stop)
    for i, values in enumerate(([0.3] * 9, [0.01] * 9, [0.3] * 9, [], [0.3] * 9, [0.05] * 9)):
        record(hist, "de", values)
        g.tick(i, i + 1)
    (trip,) = g.close()  # 0 over, 1 under (reset), 2 over, 3 empty (neither), 4 over: trip at 5; 5 under
    assert (trip.started, trip.tripped, trip.recovered) == (2, 5, 6)
    assert trip.actions == ("record", "mark", "stop")
    assert g.stopped


def test_a_window_with_too_few_samples_for_its_percentile_judges_nothing():
    # issue 18, item 16: one slow request in a quiet window was that window's p95 (its maximum)
    hist, clock = HistogramSet(), Clock()
    g = guard.Guard(
        guard.Config((guard.Check("de", "ttft", 95.0, 100.0),), 1.0, 1), "run", lambda: hist, str, clock.stop
    )
    assert (g.config.needed(95.0), g.config.needed(99.0), g.config.needed(50.0), g.config.needed(100.0)) == (
        20,
        100,
        2,
        1,
    )
    record(hist, "de", [0.01] * 18 + [0.5])  # 19 samples: p95 would be the one slow request
    g.tick(0, 1)
    assert g.close() == []
    record(hist, "de", [0.01] * 19 + [0.5] * 2)  # 21, two of them slow: p95 is slow
    g.tick(1, 2)
    assert len(g.close()) == 1


def test_min_samples_raises_the_minimum(tmp_path):
    config = guard.load(write(tmp_path, "min_samples: 50\nrules: {de: {ttft_p95_ms: 100}}\n"), slo.load(None), ("de",))
    assert (config.min_samples, config.needed(95.0), config.needed(50.0)) == (50, 50, 50)
    config = guard.load(write(tmp_path, "min_samples: 1\n"), slo.load(None), ("de",))
    assert config.needed(95.0) == 1  # a user who wants every window judged
    with pytest.raises(UsageError) as e:
        guard.load(write(tmp_path, "min_samples: 0\n"), slo.load(None), ("de",))
    assert "min_samples: must be a whole number >= 1, got 0" in str(e.value)


def test_a_window_percentile_equals_the_histogram_of_that_window_alone():
    hist = HistogramSet()
    record(hist, "de", [0.001 * i for i in range(1, 400)])
    totals = hist.combined("ttft")
    window = [0.0037 * i for i in range(1, 257)]
    record(hist, "de", window)
    alone = Histogram("ttft")
    alone.record_many(window)
    assert totals is not None
    after = hist.combined("ttft")
    assert after is not None
    counts = np.frombuffer(after.hdr.counts, dtype=np.int64, count=after.hdr.counts_len) - np.frombuffer(
        totals.hdr.counts, dtype=np.int64, count=totals.hdr.counts_len
    )
    for pct in (50.0, 95.0, 99.0, 100.0):
        assert guard._percentile(counts, after, pct) == alone.quantile(pct)


def test_recover_within_is_read_in_whole_windows(tmp_path):
    config = guard.load(write(tmp_path, "window: 2s\nrecover_within: 1m\n"), slo.load(None), ("en",))
    assert config.recover_within == 60.0
    assert guard.load(write(tmp_path, "window: 2s\n"), slo.load(None), ("en",)).recover_within is None
    for text, why in (("recover_within: 1s\nwindow: 2s\n", "must be at least one window"), ("recover_within: x\n", "")):
        with pytest.raises(UsageError) as e:
            guard.load(write(tmp_path, text), slo.load(None), ("en",))
        assert str(e.value).replace(str(tmp_path) + "/", "").startswith("guard.yaml:1: recover_within: " + why)


def test_a_rule_still_over_when_recover_within_has_passed_since_a_revert_trips_once_naming_the_fault():
    hist, clock = HistogramSet(), Clock()
    checks = (guard.Check("de", "ttft", 50.0, 100.0), guard.Check("en", "ttft", 50.0, 100.0))
    config = guard.Config(checks, 1.0, 99, frozenset({"record", "stop"}), recover_within=3.0)
    g = guard.Guard(config, "run", lambda: hist, lambda t: "baseline", clock.stop)
    g.saw({"slow-prefill"}, 0.5)
    g.saw(set(), 1.2)  # reverted at 1.2: judged from the window [2, 3] on, at the end of [4, 5] (due 4.2)
    # de stays slow; en is back only at [5, 6], after the judgement
    for i, (de, en) in enumerate(((0.3, 0.3), (0.3, 0.3), (0.3, 0.3), (0.3, 0.3), (0.3, 0.3), (0.3, 0.01))):
        record(hist, "de", [de] * 9)
        record(hist, "en", [en] * 9)
        g.tick(i, i + 1)
    trips = g.close()
    assert [(t.lang, t.fault, t.started, t.tripped) for t in trips] == [
        ("de", "slow-prefill", 1.2, 5),
        ("en", "slow-prefill", 1.2, 5),
    ]
    assert trips[0].windows_ms == pytest.approx((300.0, 300.0, 300.0), rel=0.001)  # [2,3] [3,4] [4,5]
    assert [t.actions for t in trips] == [("record", "stop"), ("record",)]  # stop acts once
    assert g.stopped


def test_a_rule_back_under_or_never_judged_after_the_revert_does_not_trip():
    hist, clock = HistogramSet(), Clock()
    checks = (guard.Check("de", "ttft", 50.0, 100.0), guard.Check("en", "ttft", 50.0, 100.0))
    config = guard.Config(checks, 1.0, 99, recover_within=2.0)
    g = guard.Guard(config, "run", lambda: hist, lambda t: "baseline", clock.stop)
    g.saw({"f"}, 0.0)
    g.saw(set(), 1.0)
    for i, de in enumerate((0.3, 0.3, 0.01, 0.3, 0.3)):  # de under at [2, 3]: back, whatever follows
        record(hist, "de", [de] * 9)  # en: no request at all after the revert
        g.tick(i, i + 1)
    assert g.close() == []
