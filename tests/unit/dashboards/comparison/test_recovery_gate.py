"""The regression gate on recovery: a ceiling, an increase over the baseline beyond one evaluation
window, never back within the run, and windows too sparse to judge, each as a rules file says."""

from __future__ import annotations

from dashboards.comparison.recovery_gate import judge, side_by_side
from dashboards.comparison.rules import ALL, RecoveryRule, Rules
from dashboards.comparison.verdicts import Rule
from llmchaos.run import Recovery


def rules(**by_lang: RecoveryRule) -> Rules:
    return Rules({}, Rule(0.05, 0.001, 0.05), dict(by_lang))


def row(recover_s: float | None, lang: str = "en", judged: int = 6) -> Recovery:
    return Recovery(
        window="first-token-delay", target="http://t", lang=lang, api="openai-chat", metric="ttft_p99_ms",
        window_s=2.0, windows=3, detect_s=2.0, recover_s=recover_s, recovered=recover_s is not None,
        judged=judged, needed=100,
    )  # fmt: skip


def test_a_ceiling_fails_a_slow_or_never_recovery():
    ceiling = rules(**{ALL: RecoveryRule(max_s=10)})
    lines, worse = judge(ceiling, [], [[row(4.0)]])
    assert (lines, worse) == (["recovery of first-token-delay en ttft_p99_ms: 4.0 s, within the rule"], False)
    lines, worse = judge(ceiling, [], [[row(None)]])
    assert worse
    assert lines == [
        "WORSE in recovery: the current runs came back more slowly than the rules allow",
        "recovery of first-token-delay en ttft_p99_ms: never back within the run, WORSE: over the 10 s allowed",
    ]


def test_an_increase_over_the_baseline_counts_beyond_one_window_of_slack():
    rule = rules(en=RecoveryRule(increase_pct=20))
    assert not judge(rule, [[row(10.0)]], [[row(13.9)]])[1]  # 10 x 1.2 + 2 s
    lines, worse = judge(rule, [[row(10.0)], [row(10.0)], [row(30.0)]], [[row(14.5)], [row(14.5)]])
    assert worse  # the medians: 10 s before, 14.5 s now
    assert lines[-1].endswith("14.5 s, WORSE: over the baseline's 10.0 s by more than 20 % and a window")
    assert not judge(rule, [[row(None)]], [[row(None)]])[1]  # never back, as before: not worse


def test_only_the_languages_a_rule_names_and_judged_windows_are_gated():
    rule = rules(de=RecoveryRule(max_s=1))
    assert judge(rule, [], [[row(50.0, lang="en")]]) == ([], False)
    lines, worse = judge(rule, [], [[row(None, lang="de", judged=0)]])
    assert (lines, worse) == (
        ["recovery of first-token-delay de ttft_p99_ms: not judged (too few samples in its windows)"],
        False,
    )


def test_compare_lists_both_sides_where_both_judged_one():
    a = [[row(4.0), row(None, lang="de")], [row(6.0)]]
    b = [[row(12.0), row(3.0, lang="de", judged=0)]]
    assert side_by_side(a, b) == ["recovery of first-token-delay en ttft_p99_ms: A 5.0 s, B 12.0 s"]
