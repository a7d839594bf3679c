"""Per-language SLOs: from the registry or `--slo FILE`; per-request attainment and percentile checks.

Keys are `<metric>_p<quantile>_ms`, e.g. `ttft_p99_ms: 100`, `itl_p99_ms: 50`; the file's
`recovery` key is the rule detection and recovery are judged by (llmchaos/recovery.py).
A request attains its language's SLO when it succeeded and its TTFT and its
mean time per output token are within the thresholds; every request issued
counts in the denominator, failures as misses.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from llmchaos import languages, yamlfile
from llmchaos.histogram import HistogramSet
from llmchaos.run.schema import SloCheck, SloResult

SLO_KEY = re.compile(r"(ttft|itl|tpot|e2e|inter_chunk)_p(\d+(?:\.\d+)?)_ms")
Slos = dict[str, dict[str, float]]


def load(path: str | None) -> Slos:
    slos: Slos = {tag: dict(lang.slo) for tag, lang in languages.registry().items()}
    if not path:
        return slos
    r = yamlfile.Reader(path)
    for lang, (k, v) in r.mapping(yamlfile.compose(path), "", "an SLO file maps language -> {ttft_p99_ms: ..}").items():
        if lang == "recovery":  # the recovery rule (llmchaos/recovery.py), not a language
            continue
        if lang not in slos:
            raise r.fail(k, lang, "unknown language")
        for key, (mk, mv) in r.mapping(v, lang).items():
            where = f"{lang}.{key}"
            if not SLO_KEY.fullmatch(key):
                raise r.fail(mk, where, "unknown SLO (use e.g. ttft_p99_ms, itl_p99_ms)")
            value = r.value(mv, where)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < math.inf:
                raise r.fail(mv, where, f"must be a positive number of ms, got {value!r}")
            slos[lang][key] = float(value)
    return slos


def attained(
    slo: Mapping[str, float],
    *,
    ok: ArrayLike,
    ttft: ArrayLike | None,
    e2e: ArrayLike | None,
    tpot: ArrayLike | None,
    max_gap: ArrayLike,
) -> NDArray[np.bool_]:
    """Whether requests met their language's SLO: each succeeded, and its TTFT, E2E, mean time per
    output token (the itl and tpot keys) and longest gap (inter_chunk) are within the thresholds.
    One request (numbers, None for a value it lacks; `bool()` of the answer) or many at once
    (arrays, NaN for a value one lacks); a missing value misses nothing."""
    met = np.asarray(ok, dtype=bool)
    values = {"ttft": ttft, "e2e": e2e, "itl": tpot, "tpot": tpot, "inter_chunk": max_gap}
    for key, ms in slo.items():
        value = values[parts(key)[0]]
        if value is not None:
            met = met & ~(np.asarray(value, dtype=float) * 1000.0 > ms)  # NaN > ms is False: no miss
    return met


def metric_of(key: str) -> str:
    """The metric an SLO key judges (ttft_p99_ms -> ttft)."""
    return parts(key)[0]


def parts(key: str) -> tuple[str, float]:
    """(metric, percentile) of a key that `load` already checked."""
    m = SLO_KEY.fullmatch(key)
    if m is None:
        raise ValueError(f"not an SLO key: {key!r}")
    return m.group(1), float(m.group(2))


def evaluate(
    slos: Slos, hist: HistogramSet, counts: Mapping[tuple[str, ...], int], duration_s: float
) -> list[SloResult]:
    """Per (target, lang, api): each percentile SLO against the histogram merged over every phase,
    plus attainment and goodput. `counts` is keyed (target, lang, api, phase, issued|met|at_stop):
    requests cancelled by the end of the test are not issued."""
    rows = []
    for target, lang, api in sorted({k[:3] for k in counts}):
        total = Counter[str]()
        for k, n in counts.items():
            if k[:3] == (target, lang, api):
                total[k[4]] += n
        issued, met = total["issued"], total["met"]
        checks = []
        for key, ms in slos.get(lang, {}).items():
            metric, pct = parts(key)
            h = hist.combined(metric, target=target, lang=lang, api=api)
            value = h.quantile(pct) * 1000.0 if h is not None and h.count else None
            checks.append(SloCheck(slo=key, threshold_ms=ms, value_ms=value, passed=value is not None and value <= ms))
        rows.append(
            SloResult(
                target=target,
                lang=lang,
                api=api,
                issued=issued,
                cancelled_at_stop=total["at_stop"],
                attained=met,
                attainment=met / issued if issued else None,
                goodput_rps=met / duration_s if duration_s > 0 else None,
                checks=tuple(checks),
                passed=all(c.passed for c in checks) if issued else None,
            )
        )
    return rows


NO_DATA = 4  # --check-slo's exit status when no SLO failed but a language had no request issued (3: the guard stopped)


def exit_status(rows: list[SloResult]) -> int:
    """--check-slo's exit status: 1 when an SLO failed, NO_DATA when none failed but a language had
    nothing issued to judge (its only requests cut by the end of the test), else 0."""
    if any(r.passed is False for r in rows):
        return 1
    return NO_DATA if any(r.passed is None for r in rows) else 0
