"""A per-language A/B comparison: every (lang, metric, phase) cell of both sides, each percentile or
rate with its difference, a confidence interval, a test, the smallest change the data could have
detected, and a verdict.

A verdict needs both: the adjusted p-value under the family's level, and a change at least the
rule's minimum (`min_effect` relative and `min_abs` absolute). Otherwise the cell is `no change`
when its data could have detected a change of that minimum size with the chosen power (the
minimum detectable effect is at most it), else `inconclusive` (not enough data to say).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from dashboards.comparison import bootstrap as stats
from dashboards.comparison.blocks import MIN_BLOCKS
from dashboards.comparison.sample import PCTS, RATES, Binned, Cell, CellKey, Known, Ratio, RunSample, group
from llmchaos.errors import UsageError
from llmchaos.metrics import PER_TURN, TURN_BUCKETS

WORSE, BETTER, NO_CHANGE, INCONCLUSIVE = "worse", "better", "no change", "inconclusive"
ORDER = {WORSE: 0, BETTER: 1, INCONCLUSIVE: 2, NO_CHANGE: 3}
MIN_TAIL = 10  # a percentile p is compared only where a run has at least this many samples above it
MIN_REQUESTS = 20


@dataclass(frozen=True)
class MetricInfo:
    label: str
    unit: str  # s | tokens | ratio | req/s | J/token | $/Mtok
    worse: int  # +1: an increase is worse; -1: a decrease is


METRICS = {
    "ttft": MetricInfo("TTFT", "s", 1),
    "ttfa": MetricInfo("time to first answer", "s", 1),
    "itl": MetricInfo("ITL", "s", 1),
    "inter_chunk": MetricInfo("inter-chunk gap", "s", 1),
    "tpot": MetricInfo("TPOT", "s", 1),
    "e2e": MetricInfo("E2E", "s", 1),
    "step": MetricInfo("turn step", "s", 1),  # --sessions: a turn's user message to its text answer, hops included
    "output_tokens": MetricInfo("output tokens", "tokens", -1),
    "reasoning_tokens": MetricInfo("reasoning tokens", "tokens", 1),  # more thinking: longer to the answer
    "error_rate": MetricInfo("error rate", "ratio", 1),
    "slo_attainment": MetricInfo("SLO attainment", "ratio", -1),
    "goodput": MetricInfo("goodput", "req/s", -1),
    "j_per_token": MetricInfo("J/token", "J/token", 1),
    "usd_per_mtok": MetricInfo("$/Mtok", "$/Mtok", 1),
}
METRICS |= {  # --sessions: each turn bucket's apart (a later turn's TTFT is its prefix cache's)
    f"{m}_turn_{b}": MetricInfo(f"{METRICS[m].label} turn {b}", "s", 1) for m in PER_TURN for b in TURN_BUCKETS
}
MIN_ABS = {"tokens": 1.0, "ratio": 0.01, "req/s": 0.0, "J/token": 0.001, "$/Mtok": 0.01}  # "s" takes --min-abs


@dataclass(frozen=True)
class Rule:
    """What a cell must show to be flagged: a relative and an absolute change, at a family level."""

    min_effect: float = 0.05
    min_abs: float = 0.001
    alpha: float = 0.05


Gate = Callable[[CellKey, str], Rule | None]  # (cell, stat) -> its rule when gated, else None


@dataclass(frozen=True)
class Settings:
    alpha: float = 0.05
    correction: str = "holm"
    min_effect: float = 0.05
    min_abs: float = 0.001  # seconds
    power: float = 0.8
    pcts: tuple[str, ...] = tuple(PCTS)
    resamples: int = stats.BOOTSTRAP
    seed: int = 0

    def rule(self, metric: str) -> Rule:
        unit = METRICS[metric].unit
        return Rule(self.min_effect, self.min_abs if unit == "s" else MIN_ABS[unit], self.alpha)

    def gate_all(self, key: CellKey, stat: str) -> Rule:
        return self.rule(key.metric)


@dataclass
class Finding:
    """One statistic of one cell compared: both sides' figures, the change with its interval, the
    verdict and why."""

    lang: str
    metric: str
    phase: str
    stat: str  # p50 | p90 | p95 | p99 | rate
    unit: str
    a: float | None
    b: float | None
    n_a: float
    n_b: float
    method: str
    gated: bool
    rel: float | None = None
    rel_ci: tuple[float, float] | None = None
    abs: float | None = None
    abs_ci: tuple[float, float] | None = None
    p: float | None = None
    p_adj: float | None = None
    mde_rel: float | None = None
    mde_abs: float | None = None
    verdict: str = INCONCLUSIVE
    reason: str = ""
    rule: Rule | None = None
    a_ci: tuple[float, float] | None = None  # each side's own interval
    b_ci: tuple[float, float] | None = None
    diff: stats.Difference | None = field(default=None, repr=False)
    log_scale: bool = field(default=True, repr=False)

    @property
    def name(self) -> str:
        return f"{self.lang} {self.metric} {self.stat} [{self.phase}]"


@dataclass
class Comparison:
    a: list[str]
    b: list[str]
    rows: list[Finding]
    settings: Settings
    notes: list[str]

    @property
    def worse(self) -> list[Finding]:
        return [r for r in self.rows if r.gated and r.verdict == WORSE]

    @property
    def exit_code(self) -> int:
        return 1 if self.worse else 0

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(ORDER, 0)
        for r in self.rows:
            out[r.verdict] += 1
        return out


def compare(
    a: Sequence[RunSample],
    b: Sequence[RunSample],
    settings: Settings,
    gate: Gate | None = None,
    notes: Sequence[str] = (),
) -> Comparison:
    """Compare every cell both sides hold; `gate` says which are gated and by what rule (default:
    every cell, by the settings); `notes` (how the runs differ) go with the runs' own."""
    gate = gate or settings.gate_all
    langs_a = {k.lang for s in a for k in s.cells}
    langs_b = {k.lang for s in b for k in s.cells}
    if not langs_a & langs_b:
        raise UsageError(
            f"A and B have no language in common (A: {', '.join(sorted(langs_a)) or 'none'}; "
            f"B: {', '.join(sorted(langs_b)) or 'none'})"
        )
    rng = np.random.default_rng(settings.seed)
    side_a, side_b = _Side(a, settings, rng), _Side(b, settings, rng)
    keys = sorted(side_a.keys() & side_b.keys(), key=lambda k: (k.lang, list(METRICS).index(k.metric), k.phase))
    rows = []
    # Thousands of small matrix products: BLAS threads only wait on each other (15x slower on a busy host).
    with threadpool_limits(limits=1, user_api="blas"):
        for key in keys:
            for stat in ("rate",) if key.metric in RATES else settings.pcts:
                rows.append(_row(key, stat, side_a, side_b, gate(key, stat), settings))
    _adjust(rows, settings)
    rows.sort(key=lambda r: (ORDER[r.verdict], not r.gated, r.p_adj if r.p_adj is not None else 2.0, r.name))
    only = [
        f"{lang}: only in {side}, not compared"
        for side, x, y in (("A", langs_a, langs_b), ("B", langs_b, langs_a))
        for lang in sorted(x - y)
    ]
    every = [*only, *notes, *sorted({n for s in (*a, *b) for n in s.notes})]
    return Comparison([s.name for s in a], [s.name for s in b], rows, settings, every)


class _Side:
    """One side's runs, with each run's bootstrap weights (one draw per run, shared by its cells)."""

    def __init__(self, runs: Sequence[RunSample], settings: Settings, rng: np.random.Generator) -> None:
        self.runs, self.resamples, self.rng = runs, settings.resamples, rng
        self.pcts = [PCTS[p] for p in settings.pcts]
        self._weights: dict[tuple[int, int], np.ndarray] = {}  # (run, blocks) -> resampled block counts
        self._boot: dict[tuple[int, CellKey], np.ndarray] = {}

    def weights(self, i: int, blocks: int) -> np.ndarray:
        got = self._weights.get((i, blocks))
        if got is None:
            got = self._weights[(i, blocks)] = stats.block_weights(blocks, self.resamples, self.rng)
        return got

    def keys(self) -> set[CellKey]:
        return {k for r in self.runs for k in r.cells}

    def cells(self, key: CellKey) -> list[tuple[int, Cell]]:
        return [(i, r.cells[key]) for i, r in enumerate(self.runs) if key in r.cells]

    def boot(self, i: int, key: CellKey, cell: Binned | Ratio) -> np.ndarray:
        """Resampled statistics of one run's cell: (resamples, percentiles) logs, or (resamples,) rates."""
        got = self._boot.get((i, key))
        if got is None:
            if isinstance(cell, Binned):
                q = stats.bootstrap_quantiles(cell.counts, cell.edges, self.pcts, self.weights(i, len(cell.counts)))
                got = np.log(np.maximum(q, 1e-12))
            else:
                got = stats.bootstrap_ratio(cell.num, cell.den, self.weights(i, len(cell.num)))
            self._boot[(i, key)] = got
        return got

    def method(self, metric: str) -> str:
        return self.runs[0].blocks[group(metric)].describe()


def _estimate(side: _Side, key: CellKey, stat: str, pcts: Sequence[str]) -> tuple[stats.Estimate | None, float, str]:
    """A side's estimate of one statistic, its sample size, and why not when it has none."""
    values, variances, n, dfs = [], [], 0.0, []
    for i, cell in side.cells(key):
        n += cell.n
        if isinstance(cell, Known):
            return None, n, cell.why
        if cell.blocks < MIN_BLOCKS:
            return None, n, f"{cell.blocks} time blocks in a run (needs {MIN_BLOCKS})"
        if isinstance(cell, Binned):
            p = PCTS[stat]
            if cell.n * (1 - p / 100) < MIN_TAIL:
                return (
                    None,
                    n,
                    f"too few samples for {stat} (a run has {cell.n:.0f}, needs {MIN_TAIL / (1 - p / 100):.0f})",
                )
            values.append(math.log(max(cell.exact[stat], 1e-12)))
            variances.append(stats.spread(side.boot(i, key, cell)[:, pcts.index(stat)]) ** 2)
            events = cell.beyond(cell.exact[stat])
        else:
            exact = cell.exact
            if cell.n < MIN_REQUESTS or exact is None:
                return None, n, f"too few requests (a run has {cell.n}, needs {MIN_REQUESTS})"
            values.append(exact)
            variances.append(stats.spread(side.boot(i, key, cell)) ** 2)
            events = cell.events()
        # A tail or a rate made by a few bursts rests on a few blocks, however many there are.
        dfs.append(max(1.0, min(cell.blocks, stats.effective_blocks(events)) - 1))
    if not values:
        return None, n, "no data"
    return stats.Estimate.of_runs(values, variances, dfs), n, ""


def _row(key: CellKey, stat: str, a: _Side, b: _Side, rule: Rule | None, settings: Settings) -> Finding:
    info = METRICS[key.metric]
    ea, na, why_a = _estimate(a, key, stat, settings.pcts)
    eb, nb, why_b = _estimate(b, key, stat, settings.pcts)
    log_scale = stat != "rate"
    show = (lambda e: math.exp(e.value)) if log_scale else (lambda e: e.value)
    row = Finding(
        key.lang,
        key.metric,
        key.phase,
        stat,
        info.unit,
        show(ea) if ea else _exact(a, key, stat),
        show(eb) if eb else _exact(b, key, stat),
        na,
        nb,
        "runs as units (Welch t)"
        if len(a.runs) > 1 and len(b.runs) > 1
        else f"block bootstrap: A {a.method(key.metric)}, B {b.method(key.metric)}",
        rule is not None,
        rule=rule or settings.rule(key.metric),
        log_scale=log_scale,
    )
    if ea is None or eb is None:
        row.reason = ("A: " + why_a) if ea is None else ("B: " + why_b)
        return row
    d = stats.difference(ea, eb)
    row.diff, row.p = d, d.p
    row.a_ci, row.b_ci = (_side_interval(e, log_scale, settings.alpha) for e in (ea, eb))
    lo, hi = d.interval(1 - settings.alpha)
    av, bv = row.a or 0.0, row.b or 0.0
    row.abs = bv - av
    if log_scale:
        row.rel, row.rel_ci = math.expm1(d.value), (math.expm1(lo), math.expm1(hi))
        half = stats.t_quantile(1 - settings.alpha / 2, d.df) * math.hypot(av * ea.se, bv * eb.se)
        row.abs_ci = (row.abs - half, row.abs + half)
    else:
        row.abs_ci = (lo, hi)
        if av:
            row.rel, row.rel_ci = row.abs / av, (lo / av, hi / av)
    return row


def _side_interval(e: stats.Estimate, log_scale: bool, alpha: float) -> tuple[float, float]:
    half = stats.t_quantile(1 - alpha / 2, e.df) * e.se
    lo, hi = e.value - half, e.value + half
    return (math.exp(lo), math.exp(hi)) if log_scale else (lo, hi)


def _exact(side: _Side, key: CellKey, stat: str) -> float | None:
    """A side's figure where it cannot be tested (the first run's)."""
    for _, cell in side.cells(key):
        if isinstance(cell, Ratio):
            return cell.exact
        return cell.exact.get(stat)
    return None


def _adjust(rows: list[Finding], settings: Settings) -> None:
    """Adjust the p-values of the gated tests together (and of the others apart), then give verdicts."""
    for gated in (True, False):
        family = [(r, r.p) for r in rows if r.gated == gated and r.p is not None]
        if not family:
            continue
        adjusted = stats.CORRECTIONS[settings.correction]([p for _, p in family])
        for (r, _), p in zip(family, adjusted, strict=True):
            r.p_adj = p
            _verdict(r, len(family), settings)


def _verdict(r: Finding, m: int, settings: Settings) -> None:
    """A tested row's verdict (`r.diff`, `r.rule` and `r.p_adj` are set)."""
    rule, diff, p_adj, av = r.rule or settings.rule(r.metric), r.diff, r.p_adj, abs(r.a or 0.0)
    if diff is None or p_adj is None:
        return
    step = stats.detectable(diff.se, diff.df, rule.alpha / m, settings.power)
    if r.log_scale:
        r.mde_rel = math.expm1(step)
        r.mde_abs = av * r.mde_rel
    else:
        r.mde_abs, r.mde_rel = step, (step / av if av else None)
    rel_big = r.rel is None or abs(r.rel) >= rule.min_effect
    if p_adj < rule.alpha and rel_big and abs(r.abs or 0.0) >= rule.min_abs:
        r.verdict = WORSE if (r.abs or 0.0) * METRICS[r.metric].worse > 0 else BETTER
    elif r.mde_abs <= max(rule.min_effect * av, rule.min_abs):
        r.verdict = NO_CHANGE
    else:
        r.verdict, r.reason = INCONCLUSIVE, "not enough data: the smallest detectable change exceeds the minimum effect"
