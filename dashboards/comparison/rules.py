"""The regression gate's rules: per language and metric, the increase allowed (relative and absolute),
the confidence required and the percentiles gated.

```yaml
defaults:                 # every rule's fields unless it says otherwise
  increase_pct: 5         # a regression is a change beyond this, relative ...
  increase_ms: 1          # ... and absolute (latencies; increase_abs for tokens, rates, J/token, $/Mtok)
  confidence: 0.95        # 1 - the family-wise error rate
de:
  ttft: {increase_pct: 10, percentiles: [p95, p99]}
"*":                      # every language
  error_rate: {increase_abs: 0.01}
  j_per_token: {increase_pct: 10}          # run.json's energy over the output tokens, per phase
  recover_s: {max: 60, increase_pct: 20}   # each fault window's recovery (run.json's `recovery`)
  wrong: {max: 0}                          # canaries answered wrong (run.json's `canaries`)
```

`recover_s` gates no statistic: a fault window's recovery against each SLO is over `max` seconds, or
more than `increase_pct` over the baseline's (plus one evaluation window, its resolution), or never
back within the run (recovery_gate.py). `wrong` gates no statistic either: the current runs' canaries
answered wrong, per language, over `max` (wrong_gate.py).

Without a rule, each language's SLOs in the registry say what is gated: every metric an SLO names,
at every percentile compared (ttft_p99_ms gates TTFT p50 to p99: a slower median is a regression
too, and a short run cannot tell its p99), plus the error rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import yaml

from dashboards.comparison.sample import PCTS, RATES, CellKey
from dashboards.comparison.verdicts import METRICS, Rule, Settings
from llmchaos import languages, slo, yamlfile

ALL = "*"
FIELDS = ("increase_pct", "increase_ms", "increase_abs", "confidence", "percentiles")
RECOVERY, RECOVERY_FIELDS = "recover_s", ("max", "increase_pct")
WRONG = "wrong"


@dataclass(frozen=True)
class RecoveryRule:
    max_s: float | None = None
    increase_pct: float | None = None


@dataclass(frozen=True)
class Gated:
    """One metric's rule: its thresholds and the statistics it gates."""

    rule: Rule
    stats: tuple[str, ...]


@dataclass(frozen=True)
class Rules:
    by_cell: dict[tuple[str, str], Gated]  # (lang or *, metric) -> rule
    defaults: Rule
    recovery: dict[str, RecoveryRule] = field(default_factory=dict)  # lang or * -> its recovery's rule
    wrong: dict[str, int] = field(default_factory=dict)  # lang or * -> the most canaries answered wrong

    def recovery_rule(self, lang: str) -> RecoveryRule | None:
        return self.recovery.get(lang) or self.recovery.get(ALL)

    def wrong_rule(self, lang: str) -> int | None:
        return self.wrong.get(lang, self.wrong.get(ALL))

    def gate(self, key: CellKey, stat: str) -> Rule | None:
        g = self.by_cell.get((key.lang, key.metric)) or self.by_cell.get((ALL, key.metric))
        return g.rule if g is not None and stat in g.stats else None

    def gated(self) -> list[tuple[str, str, str]]:
        """Every (lang or *, metric, stat) gated."""
        return sorted((lang, metric, s) for (lang, metric), g in self.by_cell.items() for s in g.stats)


def load(path: str | None, settings: Settings) -> Rules:
    """The rules file over the registry's defaults; every error names the file, line and field."""
    defaults = Rule(settings.min_effect, settings.min_abs, settings.alpha)
    by_cell = _from_registry(defaults, settings)
    if not path:
        return Rules(by_cell, defaults)
    r = yamlfile.Reader(path)
    top = r.mapping(yamlfile.compose(path), "", "a rules file maps a language (or * or defaults) to its metrics")
    if "defaults" in top:
        defaults = _rule(r, top["defaults"][1], "defaults", Gated(defaults, ()), "s").rule
        by_cell = _from_registry(defaults, settings)
    known, recovery, wrong = languages.tags(), {}, {}
    for lang, (k, v) in top.items():
        if lang == "defaults":
            continue
        if lang != ALL and lang not in known:
            raise r.fail(k, lang, f"unknown language (known: {', '.join(known)}, or * for every one)")
        for metric, (mk, mv) in r.mapping(v, lang, "maps a metric to its rule").items():
            where = f"{lang}.{metric}"
            if metric == RECOVERY:
                recovery[lang] = _recovery(r, mv, where)
                continue
            if metric == WRONG:
                wrong[lang] = _wrong(r, mv, where)
                continue
            if metric not in METRICS:
                raise r.fail(mk, where, f"unknown metric (known: {', '.join(METRICS)}, {RECOVERY}, {WRONG})")
            unit = METRICS[metric].unit
            base = Gated(replace(defaults, min_abs=_default_abs(unit, defaults)), _stats(metric, settings.pcts))
            by_cell[(lang, metric)] = _rule(r, mv, where, base, unit, metric)
    return Rules(by_cell, defaults, recovery, wrong)


def _wrong(r: yamlfile.Reader, node: yaml.Node, where: str) -> int:
    fields = r.mapping(node, where, "maps max to a whole number")
    for name, (k, _) in fields.items():
        if name != "max":
            raise r.fail(k, f"{where}.{name}", "unknown field (known: max)")
    if "max" not in fields:
        raise r.fail(node, f"{where}.max", "missing")
    value = r.value(fields["max"][1], f"{where}.max")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise r.fail(fields["max"][1], f"{where}.max", f"must be a whole number >= 0, got {value!r}")
    return value


def _recovery(r: yamlfile.Reader, node: yaml.Node, where: str) -> RecoveryRule:
    values: dict[str, float] = {}
    for name, (k, v) in r.mapping(node, where, "maps max and increase_pct to numbers").items():
        at = f"{where}.{name}"
        if name not in RECOVERY_FIELDS:
            raise r.fail(k, at, f"unknown field (known: {', '.join(RECOVERY_FIELDS)})")
        value = r.value(v, at)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise r.fail(v, at, f"must be a number >= 0, got {value!r}")
        values[name] = float(value)
    return RecoveryRule(values.get("max"), values.get("increase_pct"))


def _from_registry(defaults: Rule, settings: Settings) -> dict[tuple[str, str], Gated]:
    out: dict[tuple[str, str], Gated] = {}
    for tag, lang in languages.registry().items():
        for key in lang.slo:
            m = slo.SLO_KEY.fullmatch(key)
            if m is None:
                continue
            if m.group(1) in METRICS:
                out[(tag, m.group(1))] = Gated(defaults, tuple(settings.pcts))
        out[(tag, "error_rate")] = Gated(replace(defaults, min_abs=_default_abs("ratio", defaults)), ("rate",))
    return out


def _default_abs(unit: str, defaults: Rule) -> float:
    from dashboards.comparison.verdicts import MIN_ABS

    return defaults.min_abs if unit == "s" else MIN_ABS[unit]


def _stats(metric: str, pcts: tuple[str, ...]) -> tuple[str, ...]:
    return ("rate",) if metric in RATES else pcts


def _rule(r: yamlfile.Reader, node: yaml.Node, where: str, base: Gated, unit: str, metric: str = "") -> Gated:
    rule, stats = base.rule, base.stats
    for name, (k, v) in r.mapping(node, where).items():
        field = f"{where}.{name}"
        if name not in FIELDS:
            raise r.fail(k, field, f"unknown field (known: {', '.join(FIELDS)})")
        value = r.value(v, field)
        if name == "percentiles":
            if metric in RATES:
                raise r.fail(v, field, f"{metric} is a rate: it has no percentiles")
            if not isinstance(value, list) or not value or any(p not in PCTS for p in value):
                raise r.fail(v, field, f"must be a list of {', '.join(PCTS)}")
            stats = tuple(value)
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise r.fail(v, field, f"must be a number >= 0, got {value!r}")
        if name == "increase_pct":
            rule = replace(rule, min_effect=value / 100)
        elif name == "increase_ms":
            if unit != "s":
                raise r.fail(k, field, f"{metric} is not a latency: use increase_abs")
            rule = replace(rule, min_abs=value / 1000)
        elif name == "increase_abs":
            rule = replace(rule, min_abs=float(value))
        elif not 0.5 <= value < 1:
            raise r.fail(v, field, f"must be from 0.5 to below 1, got {value!r}")
        else:
            rule = replace(rule, alpha=1 - value)
    return Gated(rule, stats)
