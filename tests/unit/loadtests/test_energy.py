"""Reading the GPUs' energy: selectors, counters, power, a /metrics page's samples."""

import pytest

from llmchaos.errors import UsageError
from loadtests.energy.page import Page
from loadtests.energy.readings import ENERGY, MODELLED, POWER, cumulative, integrated
from loadtests.energy.sampler import source
from loadtests.energy.selector import selector

PAGE = f"""# HELP {ENERGY} Total energy consumption since boot (in mJ).
# TYPE {ENERGY} counter
{ENERGY}{{gpu="0",UUID="GPU-a",Hostname="n1"}} 1000
{ENERGY}{{gpu="1",UUID="GPU-b",Hostname="n2"}} 5000
# TYPE {POWER} gauge
{POWER}{{gpu="0",UUID="GPU-a",Hostname="n1"}} 250.5
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 3
"""


def test_a_selector_matches_as_promql_does():
    labels = {"Hostname": "gpu-1", "gpu": "0"}
    assert all(m(labels) for m in selector('{Hostname=~"gpu-.*", gpu!="1"}'))
    assert not all(m(labels) for m in selector('Hostname="gpu-2"'))
    assert selector("") == []
    assert selector("{}") == []


@pytest.mark.parametrize("bad", ['{Hostname="a"', "{Hostname=a}", '{x=~"("}', '{1x="a"}'])
def test_a_bad_selector_names_its_flag(bad):
    with pytest.raises(UsageError, match="--energy-selector"):
        selector(bad)


def test_the_source_is_told_by_the_url():
    assert isinstance(source("http://127.0.0.1:9400/metrics", ""), Page)
    assert not isinstance(source("http://127.0.0.1:9090", ""), Page)
    with pytest.raises(UsageError, match="--energy-from"):
        source("127.0.0.1:9090", "")


def test_a_page_keeps_the_selected_gpus_readings_at_their_times():
    page = Page("http://x/metrics", selector('{Hostname="n1"}'))
    page.absorb(PAGE, 10.0)
    page.absorb(PAGE.replace(" 1000\n", " 3000\n"), 12.0)
    got = page.readings(10.0, 12.0)
    assert got.method == "counter"
    assert not got.modelled
    assert got.why is None
    assert got.joules == {"GPU-a": [(10.0, 0.0), (12.0, 2.0)]}  # mJ to J
    assert got.interval_s == 2.0


def test_a_gpu_without_the_counter_is_read_by_its_power():
    page = Page("http://x/metrics", [])
    for t in (0.0, 2.0):
        page.absorb(PAGE.replace(f"{ENERGY}{{", "other{"), t)
    got = page.readings(0.0, 2.0)
    assert got.method == "power"
    assert got.joules["GPU-a"][-1] == (2.0, pytest.approx(501.0))


def test_a_modelled_series_is_marked_and_no_series_is_absent_with_why():
    page = Page("http://x/metrics", [])
    page.absorb(f'{ENERGY}{{UUID="GPU-sim",{MODELLED}="p"}} 1\n', 0.0)
    page.absorb(f'{ENERGY}{{UUID="GPU-sim",{MODELLED}="p"}} 2\n', 1.0)
    assert page.readings(0, 1).modelled
    empty = Page("http://x/metrics", [])
    empty.absorb("up 1\n", 0.0)
    got = empty.readings(0, 1)
    assert not got.joules
    assert ENERGY in (got.why or "")


def test_counter_resets_and_power_integrate_to_joules():
    assert cumulative([(0, 1000.0), (1, 3000.0), (2, 500.0)]) == [(0, 0.0), (1, 2.0), (2, 2.5)]
    assert integrated([(0, 100.0), (2, 200.0)]) == [(0, 0.0), (2, 300.0)]


class Session:
    """A fault session as the host source sees it: the hosts its schedule names and their counters."""

    def __init__(self) -> None:
        self.remote = ["gpu-1"]

    def energy(self, host: str):
        return {"GPU-a": [(1.0, 1000.0), (2.0, 3000.0)], "GPU-b": [(1.0, 0.0), (2.0, 9000.0)]}, None


def test_a_fault_host_source_needs_its_host_in_the_schedule_and_keeps_the_selected_gpus():
    with pytest.raises(UsageError, match="--energy-from: no fault host 'gpu-2' in --schedule"):
        source("host:gpu-2", "").attach(Session())
    with pytest.raises(UsageError, match="--energy-from"):
        source("host:gpu-1", "").attach(object())  # no fault session (no --schedule)
    src = source("host:gpu-1", '{UUID="GPU-a"}')
    src.attach(Session())
    got = src.readings(1.0, 2.0)
    assert got.joules == {"GPU-a": [(1.0, 0.0), (2.0, 2.0)]}
    assert got.origin == "fault host gpu-1 (NVML)"


def test_a_page_that_says_why_it_has_no_gpu_is_absent_with_its_reason():
    page = Page("http://x/metrics", [])
    page.absorb("# DCGM_FI_DEV_* gauges absent: the TorchExecutor runs on no GPU\nup 1\n", 0.0)
    got = page.readings(0, 1)
    assert not got.joules
    assert got.why == (
        f"no {ENERGY} or {POWER} series matching the selector on http://x/metrics "
        "(it says: the TorchExecutor runs on no GPU)"
    )


def test_a_selectors_strings_take_promqls_escapes_and_any_text():
    (m,) = selector('{Hostname="größe-\\"1\\"\\\\x"}')
    assert m.value == 'größe-"1"\\x'
    (m,) = selector('{a="\\x"}')  # an escape PromQL does not know: the character itself, never a crash
    assert m.value == "x"


def test_a_sample_no_gpu_can_read_is_left_out_and_one_reading_says_so():
    page = Page("http://x/metrics", [])
    for t, v in ((0.0, "NaN"), (1.0, "-5"), (2.0, "+Inf"), (3.0, "7000")):
        page.absorb(f'{ENERGY}{{UUID="GPU-a"}} {v}\n', t)
    got = page.readings(0, 3)
    assert page.counters == {"GPU-a": [(3.0, 7000.0)]}
    assert not got.joules
    assert got.why == "no GPU was read twice over the run (a run shorter than the sampling interval?)"


def test_only_a_page_is_sampled_live():
    assert source("http://x/metrics", "").live
    assert not source("http://x:9090", "").live
    assert not source("host:gpu-1", "").live
