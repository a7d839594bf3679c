"""A run's cells: the exact percentiles (HDR's nearest rank) and the split by cell."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dashboards.comparison.sample import by_cell, nearest_rank

PCTS = {"p0": 0.0, "p50": 50.0, "p90": 90.0, "p99": 99.0, "p100": 100.0}
values = st.lists(st.floats(0.0, 1e3, allow_nan=False), min_size=1, max_size=300)


@given(values)
def test_a_request_each_gives_the_value_of_rank_round_p_percent(v):
    got = nearest_rank(np.array(v), np.ones(len(v)), PCTS)
    ranked = sorted(v)
    assert got == {k: ranked[max(math.floor(len(v) * p / 100 + 0.5), 1) - 1] for k, p in PCTS.items()}


@given(values, st.data())
def test_a_weight_counts_as_that_many_requests_of_the_value(v, data):
    w = data.draw(st.lists(st.integers(1, 5), min_size=len(v), max_size=len(v)))
    repeated = np.repeat(v, w)
    assert nearest_rank(np.array(v), np.array(w, dtype=np.float64), PCTS) == nearest_rank(
        repeated, np.ones(len(repeated)), PCTS
    )


@given(st.lists(st.integers(0, 6), max_size=200))
def test_each_cell_gets_its_values_in_their_order(cells):
    c = np.array(cells, dtype=np.int32)
    t = np.arange(len(c), dtype=np.float64)
    got = {i: (a.tolist(), b.tolist()) for i, (a, b) in by_cell(c, t, -t)}
    mine = {i: [float(x) for x, k in enumerate(cells) if k == i] for i in set(cells)}
    assert got == {i: (xs, [-x for x in xs]) for i, xs in mine.items()}
