"""Per-language SLOs: from the registry or `--slo FILE`; per-request attainment and percentile checks.

Keys are `<metric>_p<quantile>_ms`, e.g. `ttft_p99_ms: 100`, `itl_p99_ms: 50`.
A request attains its language's SLO when it succeeded and its TTFT and its
mean time per output token are within the thresholds; every request issued
counts in the denominator, failures as misses.
"""

from __future__ import annotations

import re

import yaml

from llmchaos import languages, yamlfile
from llmchaos.errors import UsageError
from llmchaos.histogram import HistogramSet
from loadtests.record import RequestRecord

SLO_KEY = re.compile(r"(ttft|itl|tpot|e2e|inter_chunk)_p(\d+(?:\.\d+)?)_ms")
Slos = dict[str, dict[str, float]]


def load(path: str | None) -> Slos:
    slos: Slos = {tag: dict(lang.slo) for tag, lang in languages.registry().items()}
    if not path:
        return slos
    node = yamlfile.compose(path)
    if not isinstance(node, yaml.MappingNode):
        raise UsageError("an SLO file maps language -> {ttft_p99_ms: ..}", file=path, line=1)
    for k, v in node.value:
        if k.value not in languages.registry():
            raise UsageError("unknown language", file=path, line=k.start_mark.line + 1, field=k.value)
        if not isinstance(v, yaml.MappingNode):
            raise UsageError("must be a mapping", file=path, line=v.start_mark.line + 1, field=k.value)
        for mk, mv in v.value:
            where = f"{k.value}.{mk.value}"
            if not SLO_KEY.fullmatch(mk.value):
                raise UsageError("unknown SLO (use e.g. ttft_p99_ms, itl_p99_ms)", file=path,
                                 line=mk.start_mark.line + 1, field=where)
            value = yamlfile.value(mv)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise UsageError(f"must be a positive number of ms, got {value!r}", file=path,
                                 line=mv.start_mark.line + 1, field=where)
            slos[k.value][mk.value] = float(value)
    return slos


def attained(rec: RequestRecord, slo: dict[str, float]) -> bool:
    if rec.outcome != "ok":
        return False
    for key, ms in slo.items():
        metric = SLO_KEY.fullmatch(key).group(1)  # type: ignore[union-attr]
        value = {"ttft": rec.ttft, "e2e": rec.e2e, "itl": rec.tpot(), "tpot": rec.tpot(),
                 "inter_chunk": max(rec.gaps, default=0.0)}[metric]
        if value is not None and value * 1000.0 > ms:
            return False
    return True


def evaluate(slos: Slos, hist: HistogramSet, counts: dict[tuple, int], duration_s: float) -> list[dict]:
    """Per (target, lang, api): each percentile SLO against the merged histogram over all phases,
    plus attainment and goodput."""
    rows: list[dict] = []
    groups = sorted({(k[0], k[1], k[2]) for k in counts})
    for target, lang, api in groups:
        issued = sum(n for k, n in counts.items() if k[:3] == (target, lang, api) and k[4] == "issued")
        met = sum(n for k, n in counts.items() if k[:3] == (target, lang, api) and k[4] == "met")
        checks = []
        for key, ms in slos.get(lang, {}).items():
            metric, pct = SLO_KEY.fullmatch(key).groups()  # type: ignore[union-attr]
            h = hist.combined(metric, target=target, lang=lang, api=api)
            value = h.quantile(float(pct)) * 1000.0 if h is not None and h.count else None
            checks.append({"slo": key, "threshold_ms": ms, "value_ms": value,
                           "pass": value is not None and value <= ms})
        rows.append({"target": target, "lang": lang, "api": api, "issued": issued, "attained": met,
                     "attainment": met / issued if issued else None,
                     "goodput_rps": met / duration_s if duration_s > 0 else None,
                     "checks": checks, "pass": all(c["pass"] for c in checks) and issued > 0})
    return rows

