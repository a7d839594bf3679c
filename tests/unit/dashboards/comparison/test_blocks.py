"""Block lengths follow the data's memory: none for independent values, long for a slowly drifting
series; the blocks cover the run and each time falls in one."""

import numpy as np

from dashboards.comparison import blocks


def ar1(rho: float, n: int, rng: np.random.Generator) -> np.ndarray:
    x, e = np.empty(n), rng.normal(size=n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = rho * x[i - 1] + e[i]
    return x


def test_independent_values_need_no_long_blocks_and_a_drifting_series_does():
    rng = np.random.default_rng(0)
    white = blocks.block_bins(rng.normal(size=400))
    slow = blocks.block_bins(ar1(0.95, 400, rng))
    medium = blocks.block_bins(ar1(0.6, 400, rng))
    assert white <= 3
    assert medium > white
    assert slow > medium
    assert slow >= 10


def test_a_constant_or_empty_series_asks_for_one_bin():
    assert blocks.block_bins(np.full(100, 3.0)) == 1
    assert blocks.block_bins(np.full(100, np.nan)) == 1


def test_blocks_cover_the_span_and_index_every_time():
    grid = blocks.base(100.0, 160.0)
    assert grid.width == 60.0 / blocks.BASE_BINS or grid.width == blocks.MIN_BIN_S
    chosen = blocks.choose(grid, 7)
    assert chosen.count * chosen.width >= 60.0
    assert chosen.count <= blocks.MAX_BLOCKS
    t = np.array([100.0, 130.0, 159.999, 170.0, 90.0])
    idx = chosen.index(t)
    assert idx[0] == 0
    assert idx[-2] == chosen.count - 1  # past the end: the last block
    assert idx[-1] == 0
    assert (np.diff(idx[:3]) >= 0).all()


def test_a_bursty_series_gets_longer_blocks_than_its_shuffled_self():
    """The same values, in their bursts or shuffled: only the order differs, and only it counts."""
    rng = np.random.default_rng(3)
    level = np.repeat(rng.exponential(1.0, 40), 10)  # bursts 10 bins long
    series = level + rng.normal(0, 0.2, 400)
    assert blocks.block_bins(series) > blocks.block_bins(rng.permutation(series)) + 3
