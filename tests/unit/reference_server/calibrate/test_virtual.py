"""The engine in virtual time (reference_server/calibrate/virtual.py): the server's scheduler under a
step model, timed exactly."""

from dataclasses import replace

import pytest

from reference_server.calibrate.virtual import Arrival, serve
from reference_server.profile import Limits, Profile, StepModel

STEP = StepModel(overhead=0.002, memory=0.005, prefill_token=20e-6, decode_token=20e-6, frontend=0.010)
PROFILE = Profile(step=STEP, limits=Limits(max_model_len=4096, num_blocks=2000, prefix_caching=False))


def test_a_lone_request_takes_its_frontend_its_prefill_step_then_one_decode_step_per_token():
    (r,) = serve(PROFILE, [Arrival(1.0, prompt=500, output=5)])
    prefill = STEP.time(500, 0, 500)
    assert r.ttft == pytest.approx(0.010 + prefill)
    decodes = sum(STEP.time(0, 1, 500 + k) for k in range(1, 5))
    assert r.e2e == pytest.approx(0.010 + prefill + decodes)
    assert (r.at, r.output) == (1.0, 5)


def test_a_cached_prefix_is_not_computed_again():
    cached = replace(PROFILE, limits=replace(PROFILE.limits, prefix_caching=True))
    a, b = serve(cached, [Arrival(0.0, 500, 2, shared=320), Arrival(1.0, 500, 2, shared=320)])
    assert a.ttft == pytest.approx(0.010 + STEP.time(500, 0, 500))
    assert b.ttft == pytest.approx(0.010 + STEP.time(180, 0, 500))  # 20 blocks of 16 found


def test_past_its_batch_limit_the_engine_queues_and_serves_at_its_own_rate():
    one = replace(PROFILE, limits=replace(PROFILE.limits, max_num_seqs=1))
    served = serve(one, [Arrival(0.01 * i, 100, 10) for i in range(20)])
    service = STEP.time(100, 0, 100) + sum(STEP.time(0, 1, 100 + k) for k in range(1, 10))
    ends = sorted(r.at + r.e2e for r in served)
    assert ends[-1] - ends[0] == pytest.approx(19 * service)
    assert [r.at for r in sorted(served, key=lambda r: r.at + r.e2e)] == sorted(r.at for r in served)


def test_the_same_seed_gives_the_same_run_and_jitter_moves_it():
    jittery = replace(PROFILE, step=replace(STEP, jitter=0.05, frontend_sigma=0.1))
    arrivals = [Arrival(0.05 * i, 200, 20) for i in range(50)]
    assert serve(jittery, arrivals, seed=3) == serve(jittery, arrivals, seed=3)
    assert serve(jittery, arrivals, seed=3) != serve(jittery, arrivals, seed=4)
