"""The regression gate on recovery (`recover_s` in a rules file): per fault window, language and SLO,
how long the current runs took to come back against the rule's ceiling and against the baseline's;
and `compare`'s plain listing of both sides' recovery.

Each side's figure is the median over its runs of run.json's `recover_s` (never back within the run
counts as endless). A run whose windows held too few samples to judge (`judged` 0) says so and gates
nothing. Recovery is measured in evaluation windows, so the baseline's figure is given one window
of slack before an increase counts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from dashboards.comparison.rules import Rules
from llmchaos.run import Recovery


def _key(r: Recovery) -> tuple[str, str, str]:
    return r.window, r.lang, r.metric


def _median(rows: list[Recovery]) -> float:
    return statistics.median(r.recover_s if r.recover_s is not None else math.inf for r in rows)


def _seconds(v: float) -> str:
    return "never back within the run" if math.isinf(v) else f"{v:.1f} s"


def _by_key(runs: Iterable[list[Recovery]]) -> dict[tuple[str, str, str], list[Recovery]]:
    out: dict[tuple[str, str, str], list[Recovery]] = {}
    for rows in runs:
        for r in rows:
            out.setdefault(_key(r), []).append(r)
    return out


def side_by_side(a_runs: Iterable[list[Recovery]], b_runs: Iterable[list[Recovery]]) -> list[str]:
    """`compare`'s lines: each (window, lang, SLO) both sides judged, A's recovery beside B's
    (medians over each side's runs); informative, never gated (a rules file gates, in `regress`)."""
    a, b = _by_key(a_runs), _by_key(b_runs)
    lines = []
    for key in sorted(set(a) & set(b)):
        ra, rb = [r for r in a[key] if r.judged], [r for r in b[key] if r.judged]
        if ra and rb:
            window, lang, metric = key
            lines.append(f"recovery of {window} {lang} {metric}: A {_seconds(_median(ra))}, B {_seconds(_median(rb))}")
    return lines


def judge(
    rules: Rules, baseline: Iterable[list[Recovery]], current: Iterable[list[Recovery]]
) -> tuple[list[str], bool]:
    """One line per gated (window, lang, SLO) and whether any regressed; `baseline` and `current`
    are each run's recovery rows."""
    a, b = _by_key(baseline), _by_key(current)
    lines, worse = [], False
    for key in sorted(b):
        window, lang, metric = key
        rule = rules.recovery_rule(lang)
        if rule is None:
            continue
        rows = [r for r in b[key] if r.judged]
        name = f"recovery of {window} {lang} {metric}"
        if not rows:
            lines.append(f"{name}: not judged (too few samples in its windows)")
            continue
        now, failed = _median(rows), []
        if rule.max_s is not None and now > rule.max_s:
            failed.append(f"over the {rule.max_s:g} s allowed")
        before_rows = [r for r in a.get(key, []) if r.judged]
        if rule.increase_pct is not None and before_rows:
            before = _median(before_rows)
            allowed = before * (1 + rule.increase_pct / 100) + rows[0].window_s
            if now > allowed:
                failed.append(
                    f"over the baseline's {_seconds(before)} by more than {rule.increase_pct:g} % and a window"
                )
        worse |= bool(failed)
        verdict = "WORSE: " + "; ".join(failed) if failed else "within the rule"
        lines.append(f"{name}: {_seconds(now)}, {verdict}")
    if worse:
        lines.insert(0, "WORSE in recovery: the current runs came back more slowly than the rules allow")
    return lines, worse
