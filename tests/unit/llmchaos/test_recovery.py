"""Detection and recovery per fault window (llmchaos/recovery.py), on tallies whose truth is known:
which evaluation window first went over its SLO, and which window began the first run back within it."""

from __future__ import annotations

from collections import Counter

import pytest

from llmchaos import recovery, slo
from llmchaos.errors import UsageError
from llmchaos.run import FaultWindow

KEY = ("http://t", "en", "openai-chat")


def tallies(per_second: dict[int, tuple[int, int]], key: str = "ttft_p99_ms") -> Counter[tuple]:
    """(samples, over) per second into the collector's keys."""
    out: Counter[tuple] = Counter()
    for second, (n, over) in per_second.items():
        out[(*KEY, key, second, "n")] += n
        if over:
            out[(*KEY, key, second, "over")] += over
    return out


def fault(start: float, end: float | None, name: str = "slow") -> FaultWindow:
    return FaultWindow(
        name=name, kind="sse", target={}, params={}, planned_start=start, planned_end=end or start + 10,
        actual_start=start, actual_end=end,
    )  # fmt: skip


def run(per_second: dict[int, tuple[int, int]], f: FaultWindow, rule: recovery.Rule, end: float = 200.0, **kw):
    (row,) = recovery.evaluate(tallies(per_second), [f], rule, kw.get("outcomes", {}), end)
    return row


def healthy(seconds: range) -> dict[int, tuple[int, int]]:
    return dict.fromkeys(seconds, (10, 0))


def test_a_fault_is_detected_in_its_first_window_over_and_recovered_at_the_first_run_within():
    seconds = healthy(range(100, 160)) | dict.fromkeys(range(120, 132), (10, 5))  # 1 s of backlog past the revert
    row = run(seconds, fault(120.0, 130.0), recovery.Rule(window_s=2, windows=3, min_samples=1))
    assert row.burn == pytest.approx(50.0)  # half its samples over a p99's threshold: 50 times the 1 % allowed
    assert (row.window, row.lang, row.metric, row.window_s, row.windows) == ("slow", "en", "ttft_p99_ms", 2, 3)
    assert row.detect_s == 2.0  # the window [120, 122) was over: known at its end
    assert row.recover_s == 2.0  # [130, 132) still over; [132, 138) within, three in a row
    assert row.recovered


def test_windows_are_taken_from_the_faults_own_start_and_revert():
    seconds = healthy(range(100, 160)) | dict.fromkeys(range(121, 131), (10, 5))
    row = run(seconds, fault(120.5, 130.5), recovery.Rule(window_s=2, windows=2, min_samples=1))
    assert row.detect_s == 1.5  # [120, 122) held an over second: its end is 1.5 s after the start
    assert row.recover_s == 1.5  # [130, 132) over; [132, 136) within: from the revert at 130.5


def test_a_percentile_is_over_exactly_when_more_than_its_share_is():
    at_p99 = dict.fromkeys(range(100, 160), (100, 1))  # 1 % over: the p99 is within
    assert run(at_p99, fault(120.0, 130.0), recovery.Rule(window_s=1)).detect_s is None
    over_p99 = at_p99 | {125: (100, 2)}
    assert run(over_p99, fault(120.0, 130.0), recovery.Rule(window_s=1)).detect_s == 6.0


def test_never_over_is_no_detection_and_no_wait_to_recover():
    row = run(healthy(range(100, 160)), fault(120.0, 130.0), recovery.Rule(window_s=2, min_samples=1))
    assert (row.detect_s, row.recover_s, row.recovered, row.burn) == (None, 0.0, True, 0.0)


def test_never_back_within_the_run_is_a_value_of_its_own():
    seconds = healthy(range(100, 120)) | dict.fromkeys(range(120, 160), (10, 5))
    row = run(seconds, fault(120.0, 130.0), recovery.Rule(window_s=2, min_samples=1), end=160.0)
    assert (row.recover_s, row.recovered) == (None, False)
    still_on = run(seconds, fault(120.0, None), recovery.Rule(window_s=2, min_samples=1), end=160.0)
    assert (still_on.detect_s, still_on.recover_s, still_on.recovered) == (2.0, None, False)


def test_a_window_with_too_few_samples_neither_extends_a_run_nor_breaks_it():
    seconds = healthy(range(100, 160)) | dict.fromkeys(range(120, 130), (10, 5)) | {133: (1, 1)}
    rule = recovery.Rule(window_s=1, windows=3, min_samples=2)
    assert run(seconds, fault(120.0, 130.0), rule).recover_s == 0.0  # 130, 131, 132 within; 133 not judged
    gap = healthy(range(100, 160)) | dict.fromkeys(range(120, 130), (10, 5)) | {131: (1, 1)}
    assert run(gap, fault(120.0, 130.0), rule).recover_s == 0.0  # 130, (131 skipped), 132, 133


def test_a_failed_request_is_a_miss_and_stranded_counts_its_window():
    outcomes = {(*KEY, "slow+jitter", "stalled"): 2, (*KEY, "slow", "ok"): 9, (*KEY, "baseline", "timeout"): 4}
    row = run(
        healthy(range(100, 160)), fault(120.0, 130.0), recovery.Rule(window_s=2, min_samples=1), outcomes=outcomes
    )
    assert row.stranded == 2


def test_the_default_window_is_the_seeds_scaled_to_short_drills():
    assert recovery.Rule().window_for([fault(0, 4.5)]) == 1.0
    assert recovery.Rule().window_for([fault(0, 60), fault(100, 130)]) == 10.0
    assert recovery.Rule().window_for([fault(0, 600)]) == 30.0
    assert recovery.Rule(window_s=5).window_for([fault(0, 600)]) == 5.0


def test_by_default_a_window_needs_what_its_percentile_needs_and_none_judged_says_so():
    assert (recovery.Rule().least(99), recovery.Rule().least(95), recovery.Rule().least(50)) == (100, 20, 2)
    assert recovery.Rule(min_samples=7).least(99) == 7
    sparse = dict.fromkeys(range(100, 160), (10, 10))  # 20 samples a 2 s window: too few for a p99
    row = run(sparse, fault(120.0, 130.0), recovery.Rule(window_s=2))
    assert (row.judged, row.needed, row.detect_s, row.recovered) == (0, 100, None, False)
    judged = run(sparse, fault(120.0, 130.0), recovery.Rule(window_s=10))
    assert (judged.judged, judged.detect_s) == (4, 10.0)  # [120, 130) over at once; 130 to 160 after the revert


def test_tallies_of_samples_and_their_weights():
    assert recovery.over([0.1, 0.3, 0.05], None, 0.2) == (3, 1)
    assert recovery.over([0.1, 0.3], [4, 6], 0.2) == (10, 6)


def test_the_rule_is_read_from_the_slo_file_beside_the_languages(tmp_path):
    path = tmp_path / "slo.yaml"
    path.write_text("en: {ttft_p99_ms: 90}\nrecovery: {window: 10s, windows: 2, min_samples: 5}\n")
    assert recovery.load(str(path)) == recovery.Rule(10.0, 2, 5)
    assert slo.load(str(path))["en"]["ttft_p99_ms"] == 90  # the languages' file reads as before
    assert recovery.load(None) == recovery.Rule()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("recovery: {windw: 10s}", ":1: recovery.windw: unknown field (known: window, windows, min_samples)"),
        ("recovery: {window: 500ms}", ":1: recovery.window: must be whole seconds, at least 1 s, got 0.5 s"),
        ("recovery: {windows: 0}", ":1: recovery.windows: must be a whole number >= 1, got 0"),
        ("recovery: [30s]", ":1: recovery: recovery is a mapping (window, windows, min_samples)"),
    ],
)
def test_a_bad_rule_is_one_line_naming_file_line_and_field(tmp_path, text, message):
    path = tmp_path / "slo.yaml"
    path.write_text(text + "\n")
    with pytest.raises(UsageError) as e:
        recovery.load(str(path))
    assert str(e.value) == f"{path}{message}"
