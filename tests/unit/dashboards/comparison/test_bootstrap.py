"""The statistics against references: Holm and Benjamini-Hochberg against their textbook steps, the
block bootstrap's percentiles against the exact ones, its standard error against the spread of
many independent samples, Welch's test, the minimum detectable effect against simulated power."""

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dashboards.comparison import bootstrap as stats
from dashboards.comparison.sample import binned, nearest_rank


def test_holm_steps_down():
    # Holm (1979): sorted p 0.01, 0.02, 0.03, 0.04 of m=4 -> 0.04, 0.06, 0.06, 0.06 (monotone).
    assert stats.holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_benjamini_hochberg_steps_up():
    # BH (1995): p * m / rank, then the running minimum from the largest: 0.01*4/1=0.04, 0.02*4/2=0.04,
    # 0.03*4/3=0.04, 0.04*4/4=0.04.
    assert stats.benjamini_hochberg([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.04] * 4)
    assert stats.benjamini_hochberg([0.001, 0.5]) == pytest.approx([0.002, 0.5])


@pytest.mark.fuzz
@given(st.lists(st.floats(0, 1), min_size=1, max_size=40))
@example([0.0, 0.0])
def test_adjusted_p_values_never_fall_below_the_raw_ones_and_holm_is_stricter(p):
    holm, bh = stats.holm(p), stats.benjamini_hochberg(p)
    for raw, h, b in zip(p, holm, bh, strict=True):
        assert raw <= b + 1e-12
        assert b <= h + 1e-12
        assert h <= 1.0


def test_bootstrap_of_all_blocks_once_is_the_exact_percentile():
    rng = np.random.default_rng(0)
    v = np.exp(rng.normal(-3, 0.5, 20_000))
    cell = binned(np.sort(rng.integers(0, 50, len(v))), v, np.ones(len(v)), 50, {})
    once = stats.bootstrap_quantiles(cell.counts, cell.edges, [50, 90, 99], np.ones((1, 50)))[0]
    exact = nearest_rank(v, np.ones(len(v)), {"p50": 50, "p90": 90, "p99": 99})
    assert once == pytest.approx(list(exact.values()), rel=0.006)  # one 0.5 % bin wide


def test_block_bootstrap_error_matches_the_spread_of_independent_samples():
    """Independent samples: the bootstrap standard error of log p99 equals the standard deviation
    of log p99 over 200 fresh samples (within the estimate's own noise)."""
    rng = np.random.default_rng(1)
    n, k, values, errors = 20_000, 50, [], []
    for _ in range(200):
        v = np.exp(rng.normal(0, 0.3, n))
        cell = binned(np.sort(rng.integers(0, k, n)), v, np.ones(n), k, nearest_rank(v, np.ones(n), {"p99": 99}))
        values.append(math.log(cell.exact["p99"]))
        boot = stats.bootstrap_quantiles(cell.counts, cell.edges, [99], stats.block_weights(k, 200, rng))
        errors.append(stats.spread(np.log(boot[:, 0])))
    assert np.mean(errors) == pytest.approx(np.std(values, ddof=1), rel=0.15)


def test_welch_difference_and_interval():
    a, b = stats.Estimate(1.0, 0.1, math.inf), stats.Estimate(1.3, 0.1, math.inf)
    d = stats.difference(a, b)
    assert d.value == pytest.approx(0.3)
    assert d.se == pytest.approx(math.sqrt(0.02))
    assert d.p == pytest.approx(2 * (1 - 0.983052), rel=1e-3)  # z = 2.1213: Phi(z) = 0.983052
    lo, hi = d.interval(0.95)
    assert (lo, hi) == pytest.approx((0.3 - 1.959964 * d.se, 0.3 + 1.959964 * d.se))
    few = stats.difference(stats.Estimate(1.0, 0.1, 4), stats.Estimate(1.3, 0.1, 4))
    assert few.df == pytest.approx(8)  # Welch-Satterthwaite of equal halves
    assert few.p > d.p  # fewer degrees of freedom, a wider reference
    assert stats.difference(stats.Estimate(1, 0, 3), stats.Estimate(1, 0, 3)).p == 1.0


def test_runs_as_units_floor_their_spread_at_the_within_run_variance():
    agree = stats.Estimate.of_runs([1.0, 1.0, 1.0], [0.04, 0.04, 0.04], [9, 9, 9])
    assert agree.se == pytest.approx(math.sqrt(0.04 / 3))  # runs that agree are not taken for exact
    assert agree.df == 27  # ... and the within-run variances carry their own degrees of freedom
    spread = stats.Estimate.of_runs([1.0, 2.0, 3.0], [0.0001] * 3, [9, 9, 9])
    assert spread.se == pytest.approx(1 / math.sqrt(3))
    assert spread.df == 2
    one = stats.Estimate.of_runs([1.5], [0.01], [12])
    assert (one.value, one.se, one.df) == (1.5, pytest.approx(0.1), 12)


def test_minimum_detectable_effect_has_the_power_it_claims():
    """A true difference of the MDE is found (two-sided, at alpha) in about `power` of 4000 draws."""
    rng = np.random.default_rng(2)
    se, alpha, power = 0.05, 0.01, 0.8
    mde = stats.detectable(se, math.inf, alpha, power)
    z = rng.normal(mde, se, 4000) / se
    found = np.mean(np.abs(z) > stats.t_quantile(1 - alpha / 2, math.inf))
    assert found == pytest.approx(power, abs=0.03)


def test_effective_blocks_counts_how_evenly_events_spread():
    assert stats.effective_blocks(np.full(40, 5.0)) == pytest.approx(40)
    assert stats.effective_blocks(np.array([100.0] + [0.0] * 39)) == pytest.approx(1)
    assert stats.effective_blocks(np.zeros(5)) == 0
