"""The live guard (`--guard FILE.yaml`), the canary rule: per target and language, when a percentile
stays over its threshold for K consecutive windows, act.

```yaml
window: 30s            # each window's length (default 30 s)
windows: 3             # K: consecutive windows over the threshold (default 3)
percentile: 95         # the percentile the SLO defaults are checked at (default 95)
min_samples: 50        # a window with fewer samples is no window (default: 100 / (100 - p), 20 for p95)
actions: [mark, webhook, stop]   # besides recording the trip in run.json (always)
webhook: http://ci.example/hook  # POSTed the trip as JSON (action webhook)
recover_within: 60s    # also trip when, after a fault window's revert, a rule is still over this long
rules:                 # default: every language's SLOs (--slo or the registry) at `percentile`
  de: {ttft_p95_ms: 200}
  "*": {itl_p95_ms: 80} # every language
```

Windows are cut from the exact histograms on the master (or the single process): each window's
counts are the merged totals' counts at its end less those at its start, so a window's percentile
is exact for what the master holds then (workers report every few seconds, so a window's edge is
that coarse). A window with fewer samples than `min_samples` (by default, what its percentile
needs to be more than the window's maximum: 100 / (100 - p), 20 for p95, so one outlier in a quiet
window is no trip) extends no streak and breaks none, as an empty one. `mark` keeps the trip's
span (from its first window over to the first back under, or the end) with it in run.json, for
reports to shade; `stop` ends the test and the process exits with status 3.

`recover_within` is the recovery rule, live: a fault window's revert is stamped as the guard sees it
go (its faults polled every REVERT_POLL_S); from then on, each rule is judged in the whole windows
that start after the revert, and one that was over in each of them, with none under, by the end of
the first window that ends `recover_within` or more after the revert trips (once per fault window
and rule) with the fault window named. A rule never judged after the revert, or never over, does not trip.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gevent
import httpx
import numpy as np
import yaml

from llmchaos import slo, yamlfile
from llmchaos.errors import UsageError
from llmchaos.histogram import Histogram, HistogramSet
from llmchaos.run import GuardTrip
from llmchaos.units import duration

log = logging.getLogger("llmchaos.guard")
ACTIONS = ("record", "mark", "webhook", "stop")
FIELDS = ("window", "windows", "percentile", "min_samples", "actions", "webhook", "recover_within", "rules")
EXIT_STOPPED = 3
WEBHOOK_TIMEOUT_S = 5.0
REVERT_POLL_S = 0.25  # how often the guard looks at which faults are active (a revert is stamped this late at most)
Faults = Callable[[], list[tuple[str, str, str, bool]]]  # the timeline's (fault, kind, target, active now)


@dataclass(frozen=True)
class Check:
    lang: str
    metric: str
    percentile: float
    threshold_ms: float


@dataclass(frozen=True)
class Config:
    checks: tuple[Check, ...]
    window_s: float = 30.0
    windows: int = 3
    actions: frozenset[str] = frozenset({"record"})
    webhook: str = ""
    min_samples: int | None = None  # None: each percentile's own minimum
    recover_within: float | None = None  # seconds after a fault window's revert a rule may still be over

    def needed(self, pct: float) -> int:
        """Samples a window needs to be judged: `min_samples`, or what its `pct` percentile needs to
        be more than its maximum."""
        if self.min_samples is not None:
            return self.min_samples
        return math.ceil(100.0 / (100.0 - pct) - 1e-9) if pct < 100 else 1


def load(path: str, slos: slo.Slos, langs: tuple[str, ...]) -> Config:
    """The guard file; every error names the file, line and field."""
    r = yamlfile.Reader(path)
    top = r.mapping(yamlfile.compose(path), "", "a guard file is a mapping (window, windows, rules, ...)")
    for name, (k, _) in top.items():
        if name not in FIELDS:
            raise r.fail(k, name, f"unknown field (known: {', '.join(FIELDS)})")

    def value(name: str, default: object) -> tuple[object, yaml.Node | None]:
        return (r.value(top[name][1], name), top[name][1]) if name in top else (default, None)

    window, node = value("window", "30s")
    window_s = duration(window, "window", path, yamlfile.line(node) if node else None)
    if not 0 < window_s < math.inf:
        raise UsageError(f"must be above 0, got {window!r}", file=path, field="window")
    windows, node = value("windows", 3)
    if not isinstance(windows, int) or isinstance(windows, bool) or windows < 1:
        raise _fail(r, node, "windows", f"must be a whole number >= 1, got {windows!r}")
    pct, node = value("percentile", 95)
    if not isinstance(pct, (int, float)) or isinstance(pct, bool) or not 0 < pct <= 100:
        raise _fail(r, node, "percentile", f"must be a number above 0 up to 100, got {pct!r}")
    least, node = value("min_samples", None)
    if least is not None and (not isinstance(least, int) or isinstance(least, bool) or least < 1):
        raise _fail(r, node, "min_samples", f"must be a whole number >= 1, got {least!r}")
    actions, node = value("actions", ["record"])
    if not isinstance(actions, list) or any(a not in ACTIONS for a in actions):
        raise _fail(r, node, "actions", f"must be a list of {', '.join(ACTIONS)}, got {actions!r}")
    webhook, node = value("webhook", "")
    if not isinstance(webhook, str) or ("webhook" in actions and not webhook.startswith(("http://", "https://"))):
        raise _fail(r, node, "webhook", f"the webhook action needs an http(s) URL, got {webhook!r}")
    within, node = value("recover_within", None)
    recover_s = None
    if within is not None:
        recover_s = duration(within, "recover_within", path, yamlfile.line(node) if node else None)
        if not window_s <= recover_s < math.inf:
            raise _fail(r, node, "recover_within", f"must be at least one window ({window}), got {within!r}")
    checks = _rules(r, top["rules"][1], langs) if "rules" in top else _from_slos(slos, langs, float(pct))
    return Config(checks, window_s, windows, frozenset({"record", *actions}), webhook, least, recover_s)


def _fail(r: yamlfile.Reader, node: yaml.Node | None, field: str, message: str) -> UsageError:
    return r.fail(node, field, message) if node is not None else UsageError(message, file=r.path, field=field)


def _from_slos(slos: slo.Slos, langs: tuple[str, ...], pct: float) -> tuple[Check, ...]:
    """Each language's SLO thresholds, at `pct` (ttft_p99_ms: 130 -> TTFT p95 over 130 ms)."""
    out = []
    for lang in langs:
        for key, ms in slos.get(lang, {}).items():
            m = slo.SLO_KEY.fullmatch(key)
            if m is not None:
                out.append(Check(lang, m.group(1), pct, ms))
    return tuple(out)


def _rules(r: yamlfile.Reader, node: yaml.Node, langs: tuple[str, ...]) -> tuple[Check, ...]:
    out = []
    for lang, (k, v) in r.mapping(node, "rules", "maps a language (or *) to {ttft_p95_ms: ...}").items():
        if lang != "*" and lang not in langs:
            raise r.fail(k, f"rules.{lang}", f"not a language of this run ({', '.join(langs)}, or *)")
        for key, (kk, kv) in r.mapping(v, f"rules.{lang}").items():
            where = f"rules.{lang}.{key}"
            m = slo.SLO_KEY.fullmatch(key)
            if m is None:
                raise r.fail(kk, where, "not a percentile threshold (use e.g. ttft_p95_ms, itl_p99_ms)")
            ms = r.value(kv, where)
            if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not 0 < ms < math.inf:
                raise r.fail(kv, where, f"must be a positive number of ms, got {ms!r}")
            pct = float(m.group(2))
            if not 0 < pct <= 100:
                raise r.fail(kk, where, "the percentile must be above 0 up to 100")
            out += [Check(x, m.group(1), pct, float(ms)) for x in (langs if lang == "*" else (lang,))]
    return tuple(out)


@dataclass
class _Trip:
    """A trip as it goes on: what the run.json row will hold."""

    target: str
    check: Check
    windows_ms: list[float]
    started: float
    tripped: float
    phase: str
    actions: list[str] = field(default_factory=list)
    recovered: float | None = None
    fault: str | None = None  # a recover_within trip: the fault window it was not back from


@dataclass
class _Revert:
    """A fault window reverted at `at`: per (target, check), the values of the windows over since."""

    fault: str
    at: float
    over: dict[tuple[str, Check], list[float]] = field(default_factory=dict)
    back: set[tuple[str, Check]] = field(default_factory=set)
    done: bool = False


class Guard:
    """Checks every window on the master; `hist` gives the merged totals, `phase` the phase at a
    time, `stop` ends the test, `faults` which fault windows are active (for recover_within)."""

    def __init__(
        self,
        config: Config,
        run_id: str,
        hist: Callable[[], HistogramSet | None],
        phase: Callable[[float], str],
        stop: Callable[[], None],
        faults: Faults | None = None,
    ) -> None:
        self.config, self.run_id = config, run_id
        self._hist, self._phase, self._stop, self._faults = hist, phase, stop, faults
        self._reverts: list[_Revert] = []
        self._active: set[str] = set()
        self._watch: gevent.Greenlet | None = None
        self._seen: dict[tuple[str, str, str], np.ndarray] = {}  # (target, lang, metric) -> counts so far
        self._streak: dict[tuple[str, Check], list[tuple[float, float, float]]] = {}  # (start, end, ms)
        self._open: dict[tuple[str, Check], _Trip] = {}
        self._trips: list[_Trip] = []
        self._loop: gevent.Greenlet | None = None
        self.stopped = False

    def start(self, t0: float) -> None:
        self._loop = gevent.spawn(self._run, t0)
        if self.config.recover_within is not None and self._faults is not None:
            self._watch = gevent.spawn(self._watch_reverts, self._faults)

    def close(self) -> list[GuardTrip]:
        """Stop checking; the trips as run.json rows."""
        for greenlet in (self._loop, self._watch):
            if greenlet is not None:
                greenlet.kill(block=True)
        self._loop = self._watch = None
        return [
            GuardTrip(
                target=t.target,
                lang=t.check.lang,
                metric=t.check.metric,
                percentile=t.check.percentile,
                threshold_ms=t.check.threshold_ms,
                window_s=self.config.window_s,
                windows_ms=tuple(t.windows_ms),
                started=t.started,
                tripped=t.tripped,
                phase=t.phase,
                actions=tuple(t.actions),
                recovered=t.recovered,
                fault=t.fault,
            )
            for t in self._trips
        ]

    def _run(self, t0: float) -> None:
        k = 1
        while True:
            gevent.sleep(max(0.0, t0 + k * self.config.window_s - time.time()))
            self.tick(t0 + (k - 1) * self.config.window_s, t0 + k * self.config.window_s)
            k += 1

    def _watch_reverts(self, faults: Faults) -> None:
        while True:
            self.saw({name for name, _, _, on in faults() if on}, time.time())
            gevent.sleep(REVERT_POLL_S)

    def saw(self, active: set[str], at: float) -> None:
        """The fault windows active at unix time `at`: one active at the last look and not now is
        stamped reverted now."""
        self._reverts += [_Revert(name, at) for name in sorted(self._active - active)]
        self._active = active

    def tick(self, start: float, end: float) -> None:
        """Judge the window that just ended."""
        hist = self._hist()
        if hist is None:
            return
        values = self._window(hist)
        self._judge_recovery(values, start, end)
        for (target, check), value in values.items():
            key = (target, check)
            if value is None:
                continue
            if value * 1000 <= check.threshold_ms:
                self._streak.pop(key, None)
                trip = self._open.pop(key, None)
                if trip is not None and "mark" in self.config.actions:
                    trip.recovered = end
                continue
            streak = self._streak.setdefault(key, [])
            streak.append((start, end, value * 1000))
            if len(streak) >= self.config.windows and key not in self._open:
                self._trip(target, check, streak[-self.config.windows :], end)

    def _window(self, hist: HistogramSet) -> dict[tuple[str, Check], float | None]:
        """Each (target, check)'s percentile over the window that just ended (None: too few samples)."""
        totals: dict[tuple[str, str, str], np.ndarray] = {}
        template: dict[tuple[str, str, str], Histogram] = {}
        for key, h in hist:
            k = (key.target, key.lang, key.metric)
            counts = np.frombuffer(h.hdr.counts, dtype=np.int64, count=h.hdr.counts_len)
            totals[k] = totals[k] + counts if k in totals else counts.copy()
            template[k] = h
        out: dict[tuple[str, Check], float | None] = {}
        for k, counts in totals.items():
            window = counts - self._seen.get(k, 0)
            self._seen[k] = counts
            for check in self.config.checks:
                if (check.lang, check.metric) == k[1:]:
                    enough = int(window.sum()) >= self.config.needed(check.percentile)
                    out[(k[0], check)] = _percentile(window, template[k], check.percentile) if enough else None
        return out

    def _judge_recovery(self, values: dict[tuple[str, Check], float | None], start: float, end: float) -> None:
        """The recover_within rule over the window [start, end] that just ended: it counts for each
        revert before its start; a rule over in every such window, when the time is up, trips."""
        within = self.config.recover_within
        for revert in self._reverts:
            if revert.done or within is None or start < revert.at:
                continue
            for key, value in values.items():
                if value is None or key in revert.back:
                    continue
                if value * 1000 <= key[1].threshold_ms:
                    revert.back.add(key)
                    revert.over.pop(key, None)
                else:
                    revert.over.setdefault(key, []).append(value * 1000)
            if end >= revert.at + within:
                revert.done = True
                for (target, check), over in revert.over.items():
                    trip = _Trip(target, check, over, revert.at, end, self._phase(end), ["record"], fault=revert.fault)
                    log.warning(
                        "guard: %s %s p%g still over %g ms %.0f s after %s was reverted (%s ms)",
                        check.lang,
                        check.metric,
                        check.percentile,
                        check.threshold_ms,
                        end - revert.at,
                        revert.fault,
                        ", ".join(f"{v:.1f}" for v in over),
                    )
                    self._act(trip)

    def _trip(self, target: str, check: Check, streak: list[tuple[float, float, float]], end: float) -> None:
        trip = _Trip(target, check, [ms for _, _, ms in streak], streak[0][0], end, self._phase(end), ["record"])
        self._open[(target, check)] = trip
        log.warning(
            "guard: %s %s p%g over %g ms for %d windows (%s ms) in phase %s",
            check.lang,
            check.metric,
            check.percentile,
            check.threshold_ms,
            len(streak),
            ", ".join(f"{v:.1f}" for v in trip.windows_ms),
            trip.phase,
        )
        self._act(trip)

    def _act(self, trip: _Trip) -> None:
        """Record a trip and take the file's actions."""
        self._trips.append(trip)
        if "mark" in self.config.actions:
            trip.actions.append("mark")
        if "webhook" in self.config.actions:
            gevent.spawn(self._post, trip)
        if "stop" in self.config.actions and not self.stopped:
            self.stopped = True
            trip.actions.append("stop")
            gevent.spawn(self._stop)

    def _post(self, trip: _Trip) -> None:
        body = {
            "event": "llmchaos_guard",
            "run_id": self.run_id,
            "target": trip.target,
            "lang": trip.check.lang,
            "metric": trip.check.metric,
            "percentile": trip.check.percentile,
            "threshold_ms": trip.check.threshold_ms,
            "windows_ms": trip.windows_ms,
            "window_s": self.config.window_s,
            "started": trip.started,
            "tripped": trip.tripped,
            "phase": trip.phase,
            "fault": trip.fault,
        }
        try:
            status = httpx.post(self.config.webhook, json=body, timeout=WEBHOOK_TIMEOUT_S).status_code
            trip.actions.append(f"webhook {status}")
        except httpx.HTTPError as e:
            log.warning("guard: webhook %s failed: %s", self.config.webhook, e)
            trip.actions.append(f"webhook failed: {type(e).__name__}")


def _percentile(counts: np.ndarray, like: Histogram, pct: float) -> float | None:
    """A percentile of HDR counts as the histograms define it; `like` is a histogram with the same
    layout (None: no count)."""
    if int(counts.sum()) <= 0:
        return None
    return like.at_rank(np.cumsum(counts), pct)
