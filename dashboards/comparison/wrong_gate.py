"""The regression gate on wrong answers (`wrong: {max: N}` in a rules file): per language, the canaries
the current runs' target answered `wrong` (200, whole, failing their check) against the most allowed;
and `compare`'s plain listing of both sides' canaries.

A wrong answer is not a slower one: no baseline excuses it, so the rule is a ceiling on the current
runs' count alone. A language whose current runs sent no canary is said so and gates nothing (run
the load test with --canary-rate).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from dashboards.comparison.rules import Rules
from llmchaos.run import CanaryCount


def _tally(runs: Iterable[list[CanaryCount]]) -> tuple[Counter[str], Counter[str], dict[str, set[str]]]:
    """Per language: canaries sent, answered wrong, and the phases the wrong ones were in."""
    sent, wrong, where = Counter[str](), Counter[str](), dict[str, set[str]]()
    for rows in runs:
        for c in rows:
            sent[c.lang] += c.sent
            wrong[c.lang] += c.wrong
            if c.wrong:
                where.setdefault(c.lang, set()).add(c.phase)
    return sent, wrong, where


def _count(lang: str, sent: Counter[str], wrong: Counter[str], where: dict[str, set[str]]) -> str:
    phases = f" (in {', '.join(sorted(where[lang]))})" if lang in where else ""
    return f"{wrong[lang]} of {sent[lang]}{phases}"


def side_by_side(a_runs: Iterable[list[CanaryCount]], b_runs: Iterable[list[CanaryCount]]) -> list[str]:
    """`compare`'s lines: each language either side sent canaries in, A's wrong answers beside B's;
    informative, never gated (a rules file gates, in `regress`)."""
    a, b = _tally(a_runs), _tally(b_runs)
    return [
        f"canaries of {lang} answered wrong: A {_count(lang, *a)}, B {_count(lang, *b)}"
        for lang in sorted(set(a[0]) | set(b[0]))
    ]


def judge(rules: Rules, current: Iterable[list[CanaryCount]]) -> tuple[list[str], bool]:
    """One line per language a `wrong` rule gates, and whether any current count is over its ceiling."""
    sent, wrong, where = _tally(current)
    lines, worse = [], False
    if "*" in rules.wrong and not sent:
        lines.append("wrong answers: not judged (the current runs sent no canary: --canary-rate)")
    for lang in sorted(set(sent) | {lang for lang in rules.wrong if lang != "*"}):
        most = rules.wrong_rule(lang)
        if most is None:
            continue
        name = f"wrong answers of {lang}"
        if not sent[lang]:
            lines.append(f"{name}: not judged (the current runs sent no canary: --canary-rate)")
            continue
        over = wrong[lang] > most
        worse |= over
        verdict = f"WORSE: over the {most} allowed" if over else "within the rule"
        lines.append(f"{name}: {_count(lang, sent, wrong, where)} canaries, {verdict}")
    if worse:
        lines.insert(0, "WORSE in answers: the current runs' target answered canaries wrong beyond the rules")
    return lines, worse
