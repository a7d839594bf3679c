"""NTP's on-wire arithmetic: the offset within +- half the round trip, the least delayed sample kept."""

import pytest

from faults.host.clock import FILTER, Offset


def test_a_symmetric_exchange_gives_the_offset_exactly():
    clock = Offset()
    # host 5 s ahead; 10 ms each way; the host spent 2 ms between receipt and answer
    s = clock.add(100.0, 105.010, 105.012, 100.022)
    assert s.offset == pytest.approx(5.0)
    assert s.delay == pytest.approx(0.020)
    assert clock.uncertainty == pytest.approx(0.010)
    assert clock.to_master(105.5) == pytest.approx(100.5)


def test_asymmetry_is_within_the_uncertainty_and_the_least_delayed_sample_wins():
    clock = Offset()
    true = 5.0
    clock.add(0.0, 0.030 + true, 0.031 + true, 0.041)  # 30 ms out, 10 ms back: off by 10 ms, +-20 ms
    assert abs(clock.offset - true) <= clock.uncertainty
    clock.add(1.0, 1.001 + true, 1.002 + true, 1.003)  # a quick one
    assert clock.offset == pytest.approx(true, abs=1e-9)
    assert clock.uncertainty == pytest.approx(0.001)
    for k in range(FILTER):  # the quick one ages out of the filter
        clock.add(2.0 + k, 2.0 + k + 0.050 + true, 2.0 + k + 0.051 + true, 2.0 + k + 0.101)
    assert clock.uncertainty == pytest.approx(0.050)
    assert clock.count == FILTER + 2
