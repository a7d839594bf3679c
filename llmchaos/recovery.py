"""How fast each language broke and came back, per fault window: detection and recovery against its
SLOs, in evaluation windows, the mirror of the seeds' rollback rule ("p95 over SLO for 3 windows of
30 s").

Every request adds to its second's tally (by its start, the time its phase is taken at), per SLO
key: the samples the SLO's percentile is taken over (a TTFT, an ITL per token, ...) and how many of
them were over the threshold. A request that failed is one sample over every threshold (an outage
has no latencies, and must not look like health); one the test cancelled is none. A window of
seconds is over its SLO when more than (100 - p) % of its samples were over the threshold: exactly
when its p-th percentile is. A window with fewer than `min_samples` samples is no window: it
neither extends a run of windows nor breaks one (by default, what its percentile needs to be more
than the window's maximum, as the live guard's: 100 / (100 - p), 100 for p99, 2 for p50); `judged`
says how many windows were.

- `detect_s`: from the fault's start to the end of the first window over the SLO (None: none was);
- `recover_s`: from the fault's revert to the start of the first `windows` consecutive windows
  within the SLO (None, with `recovered` false: not within the run, or the fault was never reverted);
- `stranded`: requests started in the window's phase that got no answer in time (stalled, timed
  out before their first token or their end, or stranded: silent for the stall limit, then no answer);
- `burn`: how fast the window spent the SLO's error budget, the share of its samples over the
  threshold over the share the percentile allows (1 % for a p99): above 1, the percentile was over.

The rule comes from the SLO file's `recovery` key:

```yaml
recovery: {window: 30s, windows: 3, min_samples: 20}
```

By default `windows` is 3 and `window` 30 s scaled to short drills: a third of the shortest fault
window, in whole seconds (at least 1 s, at most 30 s).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import accumulate, repeat

from llmchaos import yamlfile
from llmchaos.run.schema import FaultWindow, Recovery
from llmchaos.units import duration

FIELDS = ("window", "windows", "min_samples")
WINDOW_S, WINDOWS = 30.0, 3  # the seeds' rule
STRANDED = ("stalled", "ttft_timeout", "timeout", "stranded")
SliceKey = tuple[str, str, str, str, int]  # (target, lang, api, SLO key, unix second of the requests' start)
Tally = tuple[int, int]  # (samples, samples over the threshold)


@dataclass(frozen=True)
class Rule:
    window_s: float | None = None  # None: scaled to the run's shortest fault window
    windows: int = WINDOWS
    min_samples: int | None = None  # None: what each SLO's percentile needs

    def least(self, pct: float) -> int:
        if self.min_samples is not None:
            return self.min_samples
        return math.ceil(100.0 / (100.0 - pct) - 1e-9) if pct < 100 else 1

    def window_for(self, faults: Iterable[FaultWindow]) -> float:
        if self.window_s is not None:
            return self.window_s
        lengths = [f.planned_end - f.planned_start for f in faults]
        return float(min(WINDOW_S, max(1, math.floor(min(lengths, default=3 * WINDOW_S) / 3))))


def over(samples: Iterable[float], counts: Iterable[int] | None, threshold_s: float) -> Tally:
    """The tally of `samples` (each standing for its count, else once) against a threshold in seconds."""
    n = bad = 0
    for value, k in zip(samples, repeat(1) if counts is None else counts, strict=False):  # repeat is endless
        n += k
        if value > threshold_s:
            bad += k
    return n, bad


def load(path: str | None) -> Rule:
    """The SLO file's `recovery` rule (the default without one); errors name the file, line and field."""
    if not path:
        return Rule()
    r = yamlfile.Reader(path)
    top = r.mapping(yamlfile.compose(path), "", "an SLO file maps language -> {ttft_p99_ms: ..}")
    if "recovery" not in top:
        return Rule()
    fields = r.mapping(top["recovery"][1], "recovery", "recovery is a mapping (window, windows, min_samples)")
    for name, (k, _) in fields.items():
        if name not in FIELDS:
            raise r.fail(k, f"recovery.{name}", f"unknown field (known: {', '.join(FIELDS)})")
    window_s = None
    if "window" in fields:
        node = fields["window"][1]
        window_s = duration(r.value(node, "recovery.window"), "recovery.window", path, yamlfile.line(node))
        if not 1 <= window_s < math.inf or window_s != int(window_s):
            raise r.fail(node, "recovery.window", f"must be whole seconds, at least 1 s, got {window_s:g} s")
    counts: list[int | None] = []
    for name, default in (("windows", WINDOWS), ("min_samples", None)):
        if name not in fields:
            counts.append(default)
            continue
        value = r.value(fields[name][1], f"recovery.{name}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise r.fail(fields[name][1], f"recovery.{name}", f"must be a whole number >= 1, got {value!r}")
        counts.append(value)
    assert counts[0] is not None
    return Rule(window_s, counts[0], counts[1])


def percentile_of(key: str) -> float:
    return float(key.rsplit("_p", 1)[1].removesuffix("_ms"))


def evaluate(
    slices: Mapping[tuple[str, ...], int],
    faults: list[FaultWindow],
    rule: Rule,
    outcomes: Mapping[tuple[str, ...], int],
    end: float,
) -> list[Recovery]:
    """Per fault window that ran × (target, lang, api) × SLO key tallied: detection and recovery.
    `slices` is keyed (target, lang, api, SLO key, second, "n" | "over"), `outcomes` (target,
    lang, api, phase, outcome); `end` is when the run ended (unix time)."""
    tallies: dict[tuple[str, str, str, str], dict[int, Tally]] = {}
    for (target, lang, api, key, second, what), count in slices.items():
        n, bad = tallies.setdefault((target, lang, api, key), {}).get(int(second), (0, 0))
        tallies[(target, lang, api, key)][int(second)] = (n + count, bad) if what == "n" else (n, bad + count)
    ran = [f for f in faults if f.actual_start is not None]
    w = rule.window_for(ran)
    judges = {
        k: _Windows(by_second, w, rule.least(percentile_of(k[3])), percentile_of(k[3]))
        for k, by_second in tallies.items()
    }
    stranded_in: Counter[tuple[str, ...]] = Counter()  # (target, lang, api, window) -> requests stranded
    for (target, lang, api, phase, outcome), n in outcomes.items():
        if outcome in STRANDED:
            for window in set(phase.split("+")):
                stranded_in[(target, lang, api, window)] += n
    rows = []
    for f in ran:
        assert f.actual_start is not None
        for (target, lang, api, key), verdicts in sorted(judges.items()):
            verdicts.judged = 0
            pct = percentile_of(key)
            until = f.actual_end if f.actual_end is not None else end
            detect = verdicts.first_over(f.actual_start, until)
            recover = verdicts.back_within(f.actual_end, end, rule.windows) if f.actual_end is not None else None
            stranded = stranded_in.get((target, lang, api, f.name), 0)
            rows.append(
                Recovery(
                    window=f.name,
                    target=target,
                    lang=lang,
                    api=api,
                    metric=key,
                    window_s=w,
                    windows=rule.windows,
                    detect_s=detect,
                    recover_s=recover,
                    recovered=recover is not None,
                    judged=verdicts.judged,
                    burn=verdicts.burn(f.actual_start, until),
                    reverted=f.actual_end,
                    needed=rule.least(pct),
                    stranded=stranded,
                )
            )
    return rows


class _Windows:
    """One (target, lang, api, SLO key)'s verdict on windows of `w` seconds from a given start."""

    def __init__(self, by_second: dict[int, Tally], w: float, least: int, pct: float) -> None:
        self.w, self.least, self.share = int(w), least, (100.0 - pct) / 100.0
        self.seconds = sorted(by_second)  # and the running sums of their tallies: any stretch's in O(log n)
        self.n = list(accumulate((by_second[s][0] for s in self.seconds), initial=0))
        self.bad = list(accumulate((by_second[s][1] for s in self.seconds), initial=0))
        self.judged = 0  # windows with enough samples, in the scans since it was last zeroed

    def tally(self, first: int, stop: int) -> Tally:
        """The samples and those over the threshold in the seconds [first, stop)."""
        i, j = bisect_left(self.seconds, first), bisect_left(self.seconds, stop)
        return self.n[j] - self.n[i], self.bad[j] - self.bad[i]

    def verdict(self, first: int) -> bool | None:
        """Whether the window of seconds [first, first + w) was over its SLO (None: too few samples)."""
        n, bad = self.tally(first, first + self.w)
        if n < self.least:
            return None
        self.judged += 1
        return bad > self.share * n

    def burn(self, start: float, until: float) -> float | None:
        """The share of samples over the threshold in the seconds from `start` to `until`, over the
        share the percentile allows (None: no sample, or a p100 that allows none)."""
        n, bad = self.tally(math.floor(start), math.ceil(until))
        return bad / n / self.share if n and self.share else None

    def first_over(self, start: float, until: float) -> float | None:
        """Seconds from `start` to the end of the first window over the SLO that starts before `until`."""
        first = math.floor(start)
        k = 0
        while first + k * self.w < until:
            if self.verdict(first + k * self.w):
                return (k + 1) * self.w - (start - first)
            k += 1
        return None

    def back_within(self, revert: float, end: float, windows: int) -> float | None:
        """Seconds from `revert` to the start of the first `windows` consecutive judged windows within
        the SLO, all of them whole before `end` (None: not within the run)."""
        first, k, streak, since = math.floor(revert), 0, 0, 0
        while first + (k + 1) * self.w <= end:
            v = self.verdict(first + k * self.w)
            if v is False:
                since = k if streak == 0 else since
                streak += 1
                if streak == windows:
                    return max(0.0, since * self.w - (revert - first))
            elif v is True:
                streak = 0
            k += 1
        return None
