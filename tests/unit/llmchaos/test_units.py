import pytest

from llmchaos.errors import UsageError
from llmchaos.units import duration


def test_durations():
    assert duration("150ms") == 0.15
    assert duration("2m") == 120
    assert duration(3) == 3.0
    with pytest.raises(UsageError, match="bad duration"):
        duration("10 parsecs", "stage")
