"""The comparison's verdict rules on small cases (a change under the minimum, not enough data, no
language in common); its calibration on simulated runs is tests/calibration/test_compare_calibration.py."""

import math

import numpy as np
import pytest

from dashboards.comparison.blocks import Blocks
from dashboards.comparison.sample import Binned, CellKey, Ratio, RunSample, binned, group, nearest_rank
from dashboards.comparison.verdicts import INCONCLUSIVE, NO_CHANGE, WORSE, Settings, compare
from llmchaos.errors import UsageError


def cell(values: np.ndarray, blocks: int = 20) -> Binned:
    n = len(values)
    return binned(np.arange(n) * blocks // n, values, np.ones(n), blocks, nearest_rank(values, np.ones(n), {"p50": 50}))


def sample(cells: dict[CellKey, Binned | Ratio], blocks: int = 20) -> RunSample:
    return RunSample("x", {group(k.metric): Blocks(0.0, 1.0, blocks) for k in cells}, cells)


def test_a_large_sample_tells_no_change_from_not_enough_data():
    rng = np.random.default_rng(5)
    key = CellKey("en", "ttft", "baseline")
    settings = Settings(pcts=("p50",))
    big = compare(
        [sample({key: cell(np.exp(rng.normal(-3, 0.2, 40_000)))})],
        [sample({key: cell(np.exp(rng.normal(-3, 0.2, 40_000)) * 1.01)})],  # +1 %: under the 5 % minimum
        settings,
    )
    (row,) = big.rows
    assert row.verdict == NO_CHANGE
    assert row.mde_rel is not None
    assert row.mde_rel < 0.05
    small = compare(
        [sample({key: cell(np.exp(rng.normal(-3, 0.6, 60)))})],
        [sample({key: cell(np.exp(rng.normal(-3, 0.6, 60)))})],
        settings,
    )
    (row,) = small.rows
    assert row.verdict == INCONCLUSIVE
    assert row.mde_rel is not None
    assert row.mde_rel > 0.05
    assert "not enough data" in row.reason


def test_a_significant_change_needs_the_minimum_effect_too():
    rng = np.random.default_rng(6)
    key = CellKey("en", "ttft", "baseline")
    a = np.exp(rng.normal(-3, 0.1, 200_000))
    b = np.exp(rng.normal(-3, 0.1, 200_000)) * 1.03  # +3 %: certain, and under 5 %
    (small,) = compare([sample({key: cell(a)})], [sample({key: cell(b)})], Settings(pcts=("p50",))).rows
    assert small.p_adj is not None
    assert small.p_adj < 1e-6
    assert small.verdict == NO_CHANGE
    (flagged,) = compare(
        [sample({key: cell(a)})], [sample({key: cell(b)})], Settings(pcts=("p50",), min_effect=0.02)
    ).rows
    assert flagged.verdict == WORSE
    assert flagged.rel == pytest.approx(0.03, abs=0.003)
    lo, hi = flagged.rel_ci or (math.nan, math.nan)
    assert 0.025 < lo < flagged.rel < hi < 0.035  # a tight interval around the +3 %


def test_too_few_samples_for_a_percentile_is_said():
    key = CellKey("en", "ttft", "baseline")
    v = np.linspace(0.01, 0.02, 300)
    (p99,) = compare([sample({key: cell(v)})], [sample({key: cell(v)})], Settings(pcts=("p99",))).rows
    assert p99.verdict == INCONCLUSIVE
    assert "too few samples for p99" in p99.reason


def test_no_language_in_common_is_a_usage_error():
    v = np.linspace(0.01, 0.02, 300)
    with pytest.raises(UsageError, match="no language in common"):
        compare(
            [sample({CellKey("en", "ttft", "baseline"): cell(v)})],
            [sample({CellKey("ja", "ttft", "baseline"): cell(v)})],
            Settings(),
        )


def test_a_lower_slo_attainment_is_worse_and_a_lower_error_rate_better():
    blocks = 20
    issued = np.full(blocks, 500.0)

    def rates(met: float, errors: float) -> dict:
        return {
            CellKey("en", "slo_attainment", "baseline"): Ratio(np.full(blocks, met), issued, 10_000, blocks),
            CellKey("en", "error_rate", "baseline"): Ratio(np.full(blocks, errors), issued, 10_000, blocks),
        }

    rng = np.random.default_rng(7)
    a = rates(490, 20)
    a = {k: Ratio(r.num + rng.normal(0, 2, blocks), r.den, r.n, r.blocks) for k, r in a.items()}
    b = {k: Ratio(r.num + rng.normal(0, 2, blocks), r.den, r.n, r.blocks) for k, r in rates(450, 5).items()}
    rows = {r.metric: r for r in compare([sample(a)], [sample(b)], Settings()).rows}
    assert rows["slo_attainment"].verdict == WORSE  # 98 % -> 90 %
    assert rows["error_rate"].verdict == "better"  # 4 % -> 1 %
