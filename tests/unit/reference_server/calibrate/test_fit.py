"""The fit (reference_server/calibrate/fit.py): it finds a step model it was shown the statistics of,
and the table says what was fitted and what was held out."""

import random
from dataclasses import replace

import pytest

from reference_server.calibrate import fit
from reference_server.calibrate.level import Level, Stats
from reference_server.calibrate.virtual import Arrival, serve
from reference_server.profile import Limits, Profile, StepModel

TRUTH = StepModel(overhead=0.003, memory=0.0, prefill_token=30e-6, decode_token=60e-6, frontend=0.012)
SERVER = Profile(limits=Limits(max_model_len=2048, num_blocks=4000, max_num_seqs=64, prefix_caching=False))


def level(rate: float, fitted: bool = True) -> Level:
    """A level whose 'measurements' are the truth's own virtual run."""
    rng, t, arrivals = random.Random(int(rate)), 0.0, []
    while (t := t + rng.expovariate(rate)) < 10.0:
        arrivals.append(Arrival(t, 300, 32))
    blank = Level(f"{rate:g} req/s", tuple(arrivals), Stats(1.0, 1.0, 1.0), fit=fitted)
    measured = blank.simulated(serve(replace(SERVER, step=TRUTH), arrivals, seed=0))
    return replace(blank, measured=measured)


def test_the_fit_finds_the_step_model_behind_the_measurements():
    """From a start 50 % off, the fit lands near the truth: percentiles of a finite run move in steps,
    so terms that trade against each other are found to a tenth or so, and the statistics to 3 %."""
    levels = (level(5), level(40), level(20, fitted=False))
    start = replace(TRUTH, overhead=0.0045, decode_token=40e-6, frontend=0.02)
    got = fit.fit(SERVER, start, levels, ("overhead", "decode_token", "frontend"), evals=150)
    assert got.overhead == pytest.approx(TRUTH.overhead, rel=0.05)
    assert got.decode_token == pytest.approx(TRUTH.decode_token, rel=0.15)
    assert got.frontend == pytest.approx(TRUTH.frontend, rel=0.05)
    rows = fit.evaluate(SERVER, got, levels)
    assert max(abs(e) for r in rows for e in r.errors) < 0.03  # the held-out level too
    assert fit.loss(rows) < fit.loss(fit.evaluate(SERVER, start, levels)) / 100


def test_the_table_shows_every_measured_statistic_fitted_or_held_out():
    levels = (level(5), level(20, fitted=False))
    text = fit.table(fit.evaluate(SERVER, TRUTH, levels))
    lines = text.splitlines()
    assert len(lines) == 1 + 2 * 3
    assert lines[1].split()[:4] == ["5", "req/s", "fit", "ttft_p50"]
    assert lines[-1].split()[:4] == ["20", "req/s", "held", "per_token"]
    assert all(line.endswith("+0.0%") for line in lines[1:])


def test_the_first_guess_for_runs_is_the_line_through_their_step_times():
    """Step times measured at two loads fix a straight line, overhead plus math per token: with
    TRUTH's (its prefill and decode tokens cost alike, here 45 us) the guess lands within a fifth."""
    truth = replace(TRUTH, prefill_token=45e-6, decode_token=45e-6)

    def measured(rate: float) -> Level:
        rng, t, arrivals = random.Random(int(rate)), 0.0, []
        while (t := t + rng.expovariate(rate)) < 10.0:
            arrivals.append(Arrival(t, 300, 32))
        blank = Level(f"{rate:g} req/s", tuple(arrivals), Stats(1.0, 1.0, 1.0), "tpot_p50")
        return replace(blank, measured=blank.simulated(serve(replace(SERVER, step=truth), arrivals)))

    guess = fit.first_guess((measured(5), measured(40)), StepModel())
    assert guess.overhead == pytest.approx(truth.overhead, rel=0.2)
    assert guess.decode_token == pytest.approx(truth.decode_token, rel=0.2)
    assert guess.frontend == pytest.approx(truth.frontend, rel=0.2)
