import pytest

from faults.injectors.base import FieldError
from faults.injectors.netem import Netem
from faults.injectors.tbf import Tbf


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"jitter": "30ms"}, "params.jitter: needs a delay"),
        ({"loss": "150%"}, "params.loss: a percentage, at most 100"),
        ({"delay": "fast"}, "params.delay: expected a number in ms"),
        ({"delay": "10ms", "rate": "fast"}, "params.rate: expected e.g. 8mbit"),
        ({"delay": "10ms", "limit": 5}, "params.limit: unknown field"),
        ({"delay": "10ms", "jitter": "1ms", "distribution": "gaussian"}, "params.distribution: expected one of"),
        ({"delay": "10ms", "distribution": "normal"}, "params.distribution: needs a jitter"),
        ({"loss": "1%", "duplicate_correlation": "5%"}, "params.duplicate_correlation: needs a duplicate"),
    ],
)
def test_bad_netem_params(params, message):
    with pytest.raises(FieldError) as e:
        Netem.options(params)
    assert f"{e.value.field}: {e.value}".startswith(message)


def test_netem_params_become_pyroute2_arguments():
    params = {
        "delay": "100ms",
        "jitter": "30ms",
        "distribution": "pareto",
        "correlation": "25%",
        "loss": "0.5%",
        "loss_correlation": "50",
        "duplicate": 1,
        "duplicate_correlation": "10%",
        "reorder": "25%",
        "reorder_correlation": "5%",
        "rate": "8mbit",
    }
    assert Netem.options(params) == {
        "delay": 100_000,
        "jitter": 30_000,
        "delay_corr": 25.0,
        "loss": 0.5,
        "loss_corr": 50.0,
        "duplicate": 1.0,
        "dup_corr": 10.0,
        "prob_reorder": 25.0,
        "corr_reorder": 5.0,
        "rate": "8mbit",
    }


@pytest.mark.parametrize("injector", [Netem, Tbf])
def test_qdisc_kinds_check_their_aim_with_their_params(injector):
    params = {"delay": "10ms"} if injector is Netem else {"rate": "8mbit"}
    target = {"netns": "lt", "interface": "veth0"}
    injector.check(target, {**params, "direction": "both", "match": {"dst": "10.0.0.0/24", "dport": 8000}})
    with pytest.raises(FieldError) as e:
        injector.check(target, {**params, "direction": "from"})
    assert e.value.field == "direction"
