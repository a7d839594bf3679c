import array

import pytest

from faults.injectors import netem
from faults.injectors.base import FieldError
from faults.injectors.netem import Netem, table
from faults.injectors.tbf import Tbf


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        (Netem, {"jitter": "30ms"}, "params.jitter: needs a delay"),
        (Netem, {"loss": "150%"}, "params.loss: a percentage, at most 100"),
        (Netem, {"delay": "fast"}, "params.delay: expected a time such as 100ms or 1s"),
        (Netem, {"delay": "-5s"}, "params.delay: expected a time such as 100ms or 1s"),
        (Netem, {"delay": "1h"}, "params.delay: at most"),
        (Netem, {"delay": "10ms", "rate": "fast"}, "params.rate: expected e.g. 8mbit"),
        (Netem, {"delay": "10ms", "limit": 5}, "params.limit: unknown field"),
        (Netem, {"delay": "10ms", "jitter": "1ms", "distribution": "gaussian"}, "params.distribution: expected one of"),
        (Netem, {"delay": "10ms", "distribution": "normal"}, "params.distribution: needs a jitter"),
        (Netem, {"loss": "1%", "duplicate_correlation": "5%"}, "params.duplicate_correlation: needs a duplicate"),
        # what tc cannot hold (issue 34, defect 19)
        (Tbf, {"rate": "40gbit"}, "params.rate: must be from 8bit (a byte a second) to 34359738360bit"),
        (Tbf, {"rate": "1.0bit"}, "params.rate: must be from 8bit"),
        (Tbf, {"rate": "8mbit", "burst": 0}, "params.burst: at least 1514 bytes"),
        (Tbf, {"rate": "100bit", "burst": 4096}, "params.burst: 4096 bytes take over 275 s at 100bit"),
        (Tbf, {"rate": "34gbit", "latency": "2s"}, "params.latency: a queue of 8500032768 bytes at 34gbit"),
    ],
)
def test_bad_qdisc_params_name_their_field(kind, params, message):
    with pytest.raises(FieldError) as e:
        kind.options(params)
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
        "rate": "8000000bit",
    }


def test_times_are_ms_or_durations_as_the_schedule_writes_them():
    opts = Netem.options({"delay": "0.1s", "jitter": 2.5})
    assert (opts["delay"], opts["jitter"]) == (100_000, 2_500)  # microseconds
    assert Netem.options({"delay": "250ms"})["delay"] == 250_000
    assert Tbf.options({"rate": "8mbit", "latency": "1s"})["latency"] == "1000000us"
    assert Tbf.options({"rate": "8mbit", "latency": 0.5})["latency"] == "500us"  # pyroute2 reads integers


def test_rates_go_to_tc_in_whole_bits():
    assert Tbf.options({"rate": "1.5mbit"})["rate"] == Netem.options({"rate": "1.5mbit"})["rate"] == "1500000bit"


@pytest.mark.parametrize("injector", [Netem, Tbf])
def test_qdisc_kinds_check_their_aim_with_their_params(injector):
    params = {"delay": "10ms"} if injector is Netem else {"rate": "8mbit"}
    target = {"netns": "lt", "interface": "veth0"}
    injector.check(target, {**params, "direction": "both", "match": {"dst": "10.0.0.0/24", "dport": 8000}})
    with pytest.raises(FieldError) as e:
        injector.check(target, {**params, "direction": "from"})
    assert e.value.field == "direction"


def test_a_distribution_table_is_read_the_way_tc_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TC_LIB_DIR", str(tmp_path))
    table.cache_clear()
    assert netem.table_dirs()[0] == tmp_path
    (tmp_path / "normal.dist").write_text("# a comment\n1 -2 0x10\n\n-32768 32767\n")
    assert array.array("h", table("normal")).tolist() == [1, -2, 16, -32768, 32767]
    Netem.check_host({"delay": "10ms", "jitter": "1ms", "distribution": "normal"})
    (tmp_path / "pareto.dist").write_text("1 40000\n")
    with pytest.raises(FieldError, match=r"pareto\.dist: not a netem table"):
        table("pareto")
    monkeypatch.setattr(netem, "table_dirs", lambda: [tmp_path])  # (the host's iproute2 has them all)
    with pytest.raises(FieldError) as e:
        Netem.check_host({"delay": "10ms", "jitter": "1ms", "distribution": "paretonormal"})
    assert (e.value.field, str(e.value)) == (
        "params.distribution",
        f"no paretonormal.dist in {tmp_path} (iproute2 installs it; or set TC_LIB_DIR)",
    )
    Netem.check_host({"delay": "10ms", "jitter": "1ms"})  # uniform: the kernel's own, no table
    table.cache_clear()
