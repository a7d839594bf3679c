import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from faults.overlap import Train, first_overlap


def windows(t: Train, until: int) -> list[tuple[int, int]]:
    if t.every is None:
        return [(t.at, t.at + t.length)]
    return [(s, s + t.length) for s in range(t.at, until, t.every)]


def overlaps_by_listing(a: Train, b: Train) -> bool:
    """Every pair of windows up to a point past which the pattern only repeats."""
    periods = [t.every for t in (a, b) if t.every]
    until = max(a.at, b.at) + math.lcm(*periods) * 2 + max(a.length, b.length) + 1 if periods else 0
    return any(s1 < e2 and s2 < e1 for s1, e1 in windows(a, until) for s2, e2 in windows(b, until))


@st.composite
def trains(draw: st.DrawFn) -> Train:
    every = draw(st.none() | st.integers(1, 40))
    length = draw(st.integers(1, every or 40))
    return Train(draw(st.integers(0, 60)), length, every)


@pytest.mark.fuzz
@given(trains(), trains())
@example(Train(0, 1, 10), Train(5, 1, 15))  # gcd 5, offset 5: they meet at 30
@example(Train(0, 2, 4), Train(1, 1, 6))
def test_first_overlap_agrees_with_listing_every_window(a, b):
    found = first_overlap(a, b)
    assert (found is not None) == overlaps_by_listing(a, b)
    if found is not None:
        sa, sb = found
        assert sa in {s for s, _ in windows(a, sa + 1)}
        assert sb in {s for s, _ in windows(b, sb + 1)}
        assert sa < sb + b.length
        assert sb < sa + a.length


def test_far_apart_periods_meet_only_after_many_windows():
    a, b = Train.of(0, 0.001, 1000.0), Train.of(1.0, 0.001, 1001.0)
    assert first_overlap(a, b) == (10**12, 10**12)  # day 11: 1 s apart, then 999 s, 998 s, ...
    assert first_overlap(a, Train.of(0.5, 0.001, 1001.0)) is None  # always half a second off


def test_seconds_to_microseconds():
    assert Train.of(0.01, 0.005, 0.01) == Train(10_000, 5_000, 10_000)
    assert Train.of(0, 1e-9, None) == Train(0, 1, None)  # a window never rounds to nothing
