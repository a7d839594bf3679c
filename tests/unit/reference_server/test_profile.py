"""Profiles (reference_server/profile.py): the named ones, the YAML a user writes, and the step model's
roofline under a locked clock."""

import pytest

from llmchaos.errors import UsageError
from reference_server import profile
from reference_server.profile import Profile, StepModel


@pytest.mark.parametrize("name", profile.names())
def test_every_named_profile_loads_says_where_it_comes_from_and_writes_back_the_same(name, tmp_path):
    p = profile.load(name)
    assert p.name == name
    assert p.source.strip(), "a profile cites its step model's source"
    assert p.power.source.strip(), "and its power model's"
    assert p.about.strip()
    assert p.limits.num_blocks >= profile.kv_blocks_needed(p.limits)
    path = tmp_path / "p.yaml"
    path.write_text(profile.dump(p))
    assert profile.load(str(path)) == p


def test_the_default_profile_is_vllm_like():
    """128K context (what the 8B it stands in for takes), no output pacer, first come first served."""
    p = profile.load(profile.DEFAULT)
    assert p.limits.max_model_len == 131072
    assert p.pacer_rate == 0.0
    assert p.policy == "fcfs"
    assert p.reasoning.median == 0


def test_a_file_over_a_base_keeps_the_rest_of_the_base(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nbase: vllm-llama3-8b-h100\nlimits: {max_num_seqs: 64}\npacer: {rate: 80, max_gap: 0.2}\n"
        "policy: wfq\n"
    )
    p, base = profile.load(str(path)), profile.load("vllm-llama3-8b-h100")
    assert p.limits.max_num_seqs == 64
    assert p.limits.max_model_len == base.limits.max_model_len
    assert (p.pacer_rate, p.pacer_max_gap, p.policy) == (80.0, 0.2, "wfq")
    assert p.step == base.step
    assert p.source == base.source  # the base's step model, and so its provenance


def test_a_step_model_of_its_own_does_not_take_the_bases_provenance(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("base: vllm-llama3-8b-h100\nstep: {overhead_us: 1000}\n")
    p = profile.load(str(path))
    assert p.step.overhead == pytest.approx(0.001)
    assert p.source == ""
    assert p.fitted == {}


def test_a_power_model_of_its_own_does_not_take_the_bases_provenance(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("base: vllm-llama3-8b-h100\npower: {idle_w: 50}\ndevice: {name: NVIDIA H200}\n")
    p, base = profile.load(str(path)), profile.load("vllm-llama3-8b-h100")
    assert p.power.idle_w == 50.0
    assert p.power.dynamic_w == base.power.dynamic_w
    assert p.power.source == ""
    assert p.source == base.source  # the step model's is still the base's
    assert p.gpu_name == "NVIDIA H200"


def test_a_power_model_draws_its_idle_power_plus_what_its_batch_and_clock_add():
    """The default fit: 73 W idle, 688 W at a full batch (ML.ENERGY's plateau), a one-token step at
    three fifths of its dynamic power (memory-bound decode), a locked clock less in proportion."""
    pw = profile.load(profile.DEFAULT).power
    assert pw.step_w(10_000, 1.0) == pw.step_w(pw.full_batch_tokens, 1.0) == pw.idle_w + pw.dynamic_w == 688.0
    assert pw.occupancy(1) == pytest.approx((1 / 320) ** 0.145)
    assert pw.step_w(1, 1.0) > pw.idle_w + pw.dynamic_w / 3
    assert pw.step_w(64, 0.5) - pw.idle_w == pytest.approx(0.5**1.5 * (pw.step_w(64, 1.0) - pw.idle_w))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("step: {overhead_us: -1}\n", ":1: step.overhead_us: must be a non-negative number, got -1"),
        ("step:\n  memory_us: fast\n", ":2: step.memory_us: must be a non-negative number, got 'fast'"),
        ("limits: {max_num_seqs: 0}\n", ":1: limits.max_num_seqs: must be a whole number >= 1, got 0"),
        ("limits: {prefix_caching: 1}\n", ":1: limits.prefix_caching: must be true or false, got 1"),
        ("limits: {max_model_len: 1000000}\n", ":1: limits.num_blocks: must hold one max_model_len request"),
        ("policy: lifo\n", ":1: policy: must be one of fcfs, wfq, two-level, got 'lifo'"),
        ("reasoning: {openai_field: thoughts}\n", ":1: reasoning.openai_field: must be one of reasoning_content"),
        ("base: nosuch\n", ":1: base: must name another profile"),
        # no upper bound had a server answering 503 "starting" for ever, or a MemoryError (issue 34, 14)
        ("step: {overhead_us: 1.0e+300}\n", ":1: step.overhead_us: must be at most 6e+07, got 1e+300"),
        ("step: {jitter: 1000}\n", ":1: step.jitter: must be at most 3, got 1000"),
        ("step: {frontend_sigma: 50}\n", ":1: step.frontend_sigma: must be at most 3, got 50"),
        ("limits: {num_blocks: 1.0e+12}\n", ":1: limits.num_blocks: must be at most 1e+07, got 1000000000000"),
        ("limits: {max_model_len: 1.0e+12, num_blocks: 7.0e+10}\n", ":1: limits.max_model_len: must be at most 1e+07"),
        ("pacer: {rate: 1.0e+9}\n", ":1: pacer.rate: must be at most 1e+06"),
        ("device: {max_clock_mhz: 1.0e+6}\n", ":1: device.max_clock_mhz: must be at most 10000"),
        ("device: {name: 5}\n", ":1: device.name: must be text, got 5"),
        ("power:\n  idle_w: 100\n  dynamic_w: 700\n", ":2: power.dynamic_w: idle_w + dynamic_w (800 W) must not"),
        ("power: {board_limit_w: 0}\n", ":1: power.board_limit_w: must be a positive number, got 0"),
        ("power: {idle_w: -1}\n", ":1: power.idle_w: must be a non-negative number, got -1"),
        ("power: {clock_exponent: 0.5}\n", ":1: power.clock_exponent: must be between 1 and 3"),
        ("power: {clock_exponent: 4}\n", ":1: power.clock_exponent: must be at most 3, got 4"),
        ("power: {full_batch_tokens: 0}\n", ":1: power.full_batch_tokens: must be a whole number >= 1, got 0"),
        ("power: {source: ''}\n", ":1: power.source: must be text, got ''"),
        ("power: {watts: 1}\n", ":1: power.watts: unknown field (fields: idle_w"),
        ("stepp: {}\n", ":1: stepp: unknown field"),
        ("step: {overhead: 5}\n", ":1: step.overhead: unknown field (fields: overhead_us"),
        ("- 1\n", ":1: a profile is a mapping"),
        ("step: [\n", ":2: invalid YAML"),
    ],
)
def test_a_bad_profile_is_one_error_naming_file_line_and_field(tmp_path, text, where):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as e:
        profile.load(str(path))
    assert str(e.value).startswith(str(path) + where), str(e.value)
    assert "\n" not in str(e.value)


def test_an_unknown_name_lists_the_named_profiles():
    with pytest.raises(UsageError, match=r"no profile file or named profile 'nosuch' \(named: blis-llama31"):
        profile.load("nosuch")


def test_a_step_is_its_overhead_the_larger_of_its_weight_reads_and_its_math_and_its_kv_reads():
    s = StepModel(overhead=0.002, memory=0.005, prefill_token=20e-6, decode_token=20e-6, context_token=40e-9)
    assert s.time(0, 10, 10_000) == pytest.approx(0.002 + 0.005 + 0.0004)  # memory-bound: the weights
    assert s.time(1000, 10, 10_000) == pytest.approx(0.002 + 0.0202 + 0.0004)  # compute-bound: the math


def test_a_locked_clock_slows_a_prefill_heavy_step_more_than_a_decode_step():
    """Only the math follows the graphics clock: a decode step of a small batch is bound by its weight
    reads and barely slows; a prefill of a long prompt is math and slows by max/locked."""
    s = profile.load(profile.DEFAULT).step
    slowdown = 1980 / 660
    prefill = s.time(2048, 0, 2048, slowdown) / s.time(2048, 0, 2048)
    decode = s.time(0, 16, 16 * 300, slowdown) / s.time(0, 16, 16 * 300)
    assert prefill > 2.0
    assert decode < 1.2
    assert prefill > decode


def test_scaling_a_step_model_scales_every_time_and_keeps_or_sets_the_jitter():
    s = StepModel(overhead=0.002, memory=0.004, prefill_token=1e-5, frontend=0.02, jitter=0.03)
    half = s.scaled(0.5)
    assert (half.overhead, half.memory, half.frontend, half.jitter) == (0.001, 0.002, 0.01, 0.03)
    assert s.scaled(0.0, 0.0) == StepModel()


def test_the_pool_must_hold_one_longest_request_past_the_watermark():
    assert profile.kv_blocks_needed(profile.Limits(max_model_len=1024, block_size=16), 0.0) == 64
    n = profile.kv_blocks_needed(profile.Limits(max_model_len=131072, block_size=16), 0.01)
    assert n - int(0.01 * n) >= 8192 > n - 1 - int(0.01 * (n - 1))
    assert Profile().limits.num_blocks >= n
    for length in range(1, 5000, 7):  # the fewest, as counting one block at a time found it
        limits = profile.Limits(max_model_len=length, block_size=16)
        n = profile.kv_blocks_needed(limits)
        per = -(-length // 16)
        assert n - int(0.01 * n) >= per > n - 1 - int(0.01 * (n - 1)), length
