"""Figures as a person reads them: durations in the unit that suits them, never in exponents."""

import pytest

from dashboards.formats.text import duration, value


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (4.2e-6, "4.2 µs"),
        (0.73, "730 ms"),
        (1.03, "1.03 s"),  # was 1.03e+03 ms
        (12.345, "12.3 s"),
        (0.9994, "999 ms"),
        (0.9996, "1 s"),  # rounds up to 1000 ms: read in seconds
        (0.0009996, "1 ms"),
        (4210.0, "4210 s"),
        (0.0, "0 s"),
        (-0.5, "-500 ms"),
    ],
)
def test_a_duration_reads_in_its_own_unit(seconds, shown):
    assert duration(seconds) == shown
    assert value(seconds, "s") == shown
