import pytest

from faults.injectors.base import FieldError
from faults.injectors.netem import Netem


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"delay": "100ms", "jitter": "30ms", "loss": "0.5%"}, None),
        ({"jitter": "30ms"}, "params.jitter: needs a delay"),
        ({"loss": "150%"}, "params.loss: a percentage, at most 100"),
        ({"delay": "fast"}, "params.delay: expected a number in ms"),
        ({"delay": "10ms", "rate": "fast"}, "params.rate: expected e.g. 8mbit"),
        ({"delay": "10ms", "limit": 5}, "params.limit: unknown field"),
    ],
)
def test_netem_params(params, message):
    if message is None:
        assert Netem.options(params) == {"delay": 100_000, "jitter": 30_000, "loss": 0.5}
        return
    with pytest.raises(FieldError) as e:
        Netem.options(params)
    assert f"{e.value.field}: {e.value}".startswith(message)
