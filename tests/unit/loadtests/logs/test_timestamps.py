from datetime import UTC, datetime

import pytest

from loadtests.logs.timestamps import iso, seconds

T = datetime(2024, 3, 1, 10, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-01T10:00:00Z", T),
        ("2024-03-01 10:00:00", T),  # no zone: UTC
        ("2024-03-01T12:00:00+02:00", T),
        ("2024-03-01T12:00:00+0200", T),
        ("2024-03-01 10:00:00.1234567", T + 0.1234567),  # seven digits, as Azure writes them
        ("1709287200.5", T + 0.5),
        (1709287200, T),
    ],
)
def test_timestamps_as_logs_write_them(text, expected):
    assert seconds(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01T00:00:00Z", True, None, [], "nan", float("inf")])
def test_what_is_no_timestamp(bad):
    with pytest.raises(ValueError, match="timestamp"):
        seconds(bad)


def test_iso_round_trips():
    assert iso(T + 0.25) == "2024-03-01T10:00:00.250000Z"
    assert seconds(iso(T + 0.25)) == T + 0.25
