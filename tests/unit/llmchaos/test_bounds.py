"""The generator's error bar: with every sample within its error of the truth, the true percentile
lies within the bound, one-sided for TTFT; material when it could flip an SLO or is wide at p50/p99.
Held against samples moved every way their errors allow."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from llmchaos import bounds, slo
from llmchaos.histogram import Histogram, HistogramSet, Key, nearest_rank
from llmchaos.run import Bound, SloCheck, SloResult
from llmchaos.run.table import bound_lines
from loadtests.record import RequestRecord

TARGET, LANG, API = "http://t", "en", "openai-chat"


def row(*checks: tuple[str, float]) -> SloResult:
    return SloResult(
        target=TARGET,
        lang=LANG,
        api=API,
        issued=1,
        attained=1,
        attainment=1.0,
        goodput_rps=1.0,
        passed=None,
        checks=tuple(SloCheck(slo=key, threshold_ms=ms, value_ms=None, passed=False) for key, ms in checks),
    )


def counted(measured: list[float], errors: list[float], metric: str = "itl") -> Counter[tuple[str, ...]]:
    """The collector's counts of samples measured so and off by up to these errors (seconds; 0:
    exact), each in the phase `hist_of` records it in."""
    out: Counter[tuple[str, ...]] = Counter()
    half = len(measured) // 2
    for i, (m, e) in enumerate(zip(measured, errors, strict=True)):
        if e:
            for key in bounds.late_keys(metric, m, e, 0.0 if metric == "ttft" else e):
                out[(TARGET, LANG, API, "baseline" if i < half else "slow", key)] += 1
    return out


def overall(bars: list[Bound]) -> list[Bound]:
    """The bounds over every phase (the SLO's figures), not each phase's."""
    return [b for b in bars if b.phase is None]


def hist_of(metric: str, values: list[float]) -> HistogramSet:
    h = HistogramSet()
    half = len(values) // 2  # two phases: the bound is over every phase, as the SLO checks are
    h.record_many(Key(TARGET, LANG, API, "baseline", metric), values[:half])
    h.record_many(Key(TARGET, LANG, API, "slow", metric), values[half:])
    return h


def test_an_uncertain_sample_is_counted_as_measured_at_its_least_and_at_its_most():
    h = Histogram("itl")
    assert bounds.late_keys("itl", 0.010, 0.002, 0.003) == [
        f"late:itl:{a}:{h.index(v)}" for a, v in (("measured", 0.010), ("least", 0.008), ("most", 0.013))
    ]
    assert bounds.late_keys("ttft", 0.3, 0.5, 0.0) == [
        f"late:ttft:{a}:{h.index(v)}" for a, v in (("measured", 0.3), ("least", 0.0), ("most", 0.3))
    ]


@pytest.mark.parametrize("seed", range(30))
def test_the_true_percentile_lies_within_the_bound_however_the_samples_moved(seed):
    rng = random.Random(seed)
    true = [rng.lognormvariate(-4, 0.8) for _ in range(3000)]
    share = rng.choice([0.0005, 0.01, 0.1, 0.6])  # from a few late reads to a phase the network batched
    errors = [rng.choice([0.0002, 0.001, 0.02, 0.5]) if rng.random() < share else 0.0 for _ in true]
    measured = [max(1e-6, t + rng.uniform(-e, e)) for t, e in zip(true, errors, strict=True)]
    rows = [row(("itl_p95_ms", 30.0), ("itl_p99.9_ms", 90.0))]
    every = bounds.evaluate(hist_of("itl", measured), counted(measured, errors), rows)
    bars = {b.percentile: b for b in overall(every)}
    assert set(bars) == {50.0, 95.0, 99.0, 99.9}
    for p, b in bars.items():
        assert b.low_ms <= b.value_ms <= b.high_ms
        assert b.uncertain == pytest.approx(sum(1 for e in errors if e) / len(true))
        truth = nearest_rank(true, p) * 1000
        assert b.low_ms * 0.999 <= truth <= b.high_ms * 1.001, (p, b, truth)  # the histograms' 0.1 %
    half = len(true) // 2  # and each phase's, as `hist_of` split them
    for b in (b for b in every if b.phase is not None):
        truth = nearest_rank(true[:half] if b.phase == "baseline" else true[half:], b.percentile) * 1000
        assert b.low_ms * 0.999 <= truth <= b.high_ms * 1.001, (b, truth)
    assert sorted((b.phase, b.percentile) for b in every if b.phase) == [
        ("baseline", 50.0),
        ("baseline", 99.0),
        ("slow", 50.0),
        ("slow", 99.0),
    ]


def test_small_errors_give_a_narrow_bound_where_shifting_ranks_would_not():
    rng = random.Random(1)
    true = [0.02 + rng.random() * 0.02 for _ in range(2000)]  # ITL 20-40 ms
    errors = [0.0003] * 400 + [0.0] * 1600  # a fifth of the samples off by 0.3 ms at most
    measured = [t + rng.uniform(-e, e) for t, e in zip(true, errors, strict=True)]
    rows = [row(("itl_p99_ms", 50.0))]
    bars = overall(bounds.evaluate(hist_of("itl", measured), counted(measured, errors), rows))
    p99 = next(b for b in bars if b.percentile == 99.0)
    assert p99.high_ms - p99.low_ms <= 2 * 0.3 + 0.1  # the errors' bound, not 20 % of the ranks
    assert bounds.material(bars, rows) == []


def test_a_ttft_is_never_read_early_so_its_bound_ends_at_its_measure():
    values = [0.1 + i / 1000 for i in range(1000)]
    errors = [0.0] * 490 + [0.004] * 20 + [0.0] * 490  # 20 around the median, each up to 4 ms early
    p50, _p99 = overall(bounds.evaluate(hist_of("ttft", values), counted(values, errors, "ttft"), [row()]))
    assert p50.high_ms == p50.value_ms
    assert p50.low_ms == pytest.approx(p50.value_ms - 4, abs=0.6)  # 595 ms: 20 samples 4 ms earlier


def test_no_late_read_leaves_no_bound_and_nothing_material():
    bars = overall(bounds.evaluate(hist_of("itl", [0.01] * 100), Counter(), [row(("itl_p99_ms", 10.0))]))
    assert all(b.low_ms == b.value_ms == b.high_ms and b.uncertain == 0 for b in bars)
    assert bounds.material(bars, [row(("itl_p99_ms", 10.0))]) == []


def test_a_bound_is_material_when_it_could_flip_an_slo_or_is_wide():
    values = [0.010] * 980 + [0.050] * 20  # p99 at 50 ms; 1.5 % off by up to 60 ms could bring it to 10 ms
    errors = [0.0] * 985 + [0.06] * 15  # the slowest 15, each up to 60 ms off
    rows = [row(("itl_p99_ms", 30.0))]
    bars = overall(bounds.evaluate(hist_of("itl", values), counted(values, errors), rows))
    (flip,) = [line for line in bounds.material(bars, rows) if "p99" in line]
    assert flip.startswith("en itl_p99_ms 50.0 ms could be 10.0 to ")
    assert "(1.5% of its samples read with bytes that came after them): its SLO (30) could flip" in flip
    rows = [row(("itl_p99_ms", 200.0))]  # a threshold out of reach: still wider than 10 % at p99
    (wide,) = bounds.material(bounds.evaluate(hist_of("itl", values), counted(values, errors), rows), rows)
    assert wide.startswith("en itl p99 50.0 ms could be 10.0 to ")
    assert wide.endswith("over 10% of it")


def test_a_figure_near_nothing_is_not_made_material_by_a_fraction_of_a_millisecond():
    values = [0.000002] * 600 + [0.02] * 400  # events the network delivered together: ITL p50 near nothing
    errors = [0.0001] * 600 + [0.0] * 400
    rows = [row(("itl_p99_ms", 60.0))]
    bars = overall(bounds.evaluate(hist_of("itl", values), counted(values, errors), rows))
    p50 = next(b for b in bars if b.percentile == 50.0)
    assert p50.high_ms > p50.value_ms * 10  # wide against its figure, but 0.1 ms
    assert bounds.material(bars, rows) == []


def test_slo_keys_read_their_percentile():
    assert slo.parts("itl_p99.9_ms") == ("itl", 99.9)


def test_a_request_says_how_far_its_reads_of_several_events_can_have_moved_each_sample():
    rec = RequestRecord(LANG, API, TARGET, chunks=["a", "b", "c", "d", "e"], gaps=[0.01] * 4, ttft=0.1)
    assert rec.late_errors() == (0.0, [])
    rec.late_spans = [(2, 2, 0.003)]  # c and d in one read, its first bytes up to 3 ms before its stamp
    # into c: up to 3 ms less; c to d: either way; d to e: up to 3 ms more
    assert rec.late_errors() == (0.0, [(0.01, 0.003, 0.0, 1), (0.01, 0.003, 0.003, 1), (0.01, 0.0, 0.003, 1)])
    rec.late_spans = [(0, 2, 0.002), (3, 2, 0.005)]  # a and b (TTFT too), then d and e
    assert rec.late_errors() == (
        0.002,
        [(0.01, 0.002, 0.002, 1), (0.01, 0.0, 0.002, 1), (0.01, 0.005, 0.0, 1), (0.01, 0.005, 0.005, 1)],
    )
    rec.outcome = "stalled"
    assert rec.late_errors() == (0.0, [])  # no sample at all


def test_the_printed_line_gives_each_metric_s_widest_bar_at_p99_and_the_languages_it_is_for():
    def bar(lang: str, metric: str, value: float, low: float, high: float, phase: str | None = None) -> Bound:
        return Bound(target=TARGET, lang=lang, api=API, metric=metric, percentile=99.0, value_ms=value, low_ms=low,
                     high_ms=high, uncertain=0.01, phase=phase)  # fmt: skip

    class Run:  # what the line reads of a run
        targets = (TARGET,)

        class validity:  # the run's field
            bounds = (
                bar("en", "ttft", 412.0, 411.5, 412.0),
                bar("de", "ttft", 300.0, 300.0, 300.0),
                bar("en", "itl", 40.0, 39.81, 40.19),
                bar("de", "itl", 50.0, 50.0, 50.1),
                bar("fr", "itl", 50.0, 48.0, 52.0, phase="slow"),  # a phase's bar: not the run's figure
            )

    assert bound_lines(Run()) == [  # type: ignore[arg-type]
        "the generator's error bar at p99 (events that shared a read's stamp): TTFT within -0.5 ms (en 412.0 ms "
        "-0.5); ITL within ±0.19 ms (en 40.0 ms ±0.19, de 50.0 ms +0.1)"
    ]
    Run.validity.bounds = (bar("en", "ttft", 412.0, 412.0, 412.0), bar("en", "itl", 40.0, 40.0, 40.0))
    assert bound_lines(Run()) == [  # type: ignore[arg-type]
        "the generator's error bar at p99 (events that shared a read's stamp): TTFT exact; ITL exact"
    ]
