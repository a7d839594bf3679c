import json
import math
import random
import statistics
import sys

import pytest

from llmchaos import yamlfile
from llmchaos.errors import UsageError
from loadtests import distributions
from loadtests.distributions import Distribution

N = 20000


def load(tmp_path, text: str, whole: bool = False) -> Distribution:
    """The distribution a profile states as `d: TEXT`."""
    p = tmp_path / "d.yaml"
    p.write_text(f"d: {text}\n")
    r = yamlfile.Reader(str(p))
    return distributions.load(r, r.mapping(yamlfile.compose(str(p)), "")["d"][1], "sessions.d", whole)


def draws(d: Distribution, n: int = N) -> list[float]:
    rng = random.Random(5)
    return [d.draw(rng) for _ in range(n)]


def test_a_flags_text_is_constant_or_uniform(tmp_path):
    assert distributions.parse("3", "--turns", True) == Distribution("constant", True, 3, 3)
    assert distributions.parse("500ms-2s", "--turn-think", False) == Distribution("uniform", False, 0.5, 2.0)
    assert load(tmp_path, "4-8", whole=True) == Distribution("uniform", True, 4, 8)
    assert set(draws(load(tmp_path, "4-8", whole=True), 2000)) == {4, 5, 6, 7, 8}


@pytest.mark.parametrize(
    ("text", "whole", "mean"),
    [
        ("{distribution: exponential, average: 3s}", False, 3.0),
        ("{distribution: lognormal, average: 2s}", False, 2.0),
        ("{distribution: lognormal, average: 2s, median_ratio: 0.5}", False, 2.0),
        ("{distribution: poisson, alpha: 6}", True, 6.0),
        ("{distribution: uniform, min: 1s, max: 3s}", False, 2.0),
        ("{distribution: constant, value: 1.5}", False, 1.5),
    ],
)
def test_each_distribution_draws_its_stated_mean(tmp_path, text, whole, mean):
    d = load(tmp_path, text, whole)
    assert statistics.fmean(draws(d)) == pytest.approx(mean, rel=0.04)
    assert draws(d, 50) == draws(d, 50)  # seeded: a run repeats its draws


def test_a_lognormal_by_its_average_has_the_median_it_states(tmp_path):
    d = load(tmp_path, "{distribution: lognormal, average: 4s, median_ratio: 0.6}")
    assert statistics.median(draws(d)) == pytest.approx(2.4, rel=0.04)


def test_max_caps_and_counts_are_whole_and_at_least_one(tmp_path):
    zipf = draws(load(tmp_path, "{distribution: zipf, alpha: 1.5, max: 20}", whole=True))
    assert min(zipf) == 1
    assert max(zipf) == 20
    assert all(v == int(v) for v in zipf)
    assert statistics.fmean(v == 1 for v in zipf) == pytest.approx(1 / 2.612, rel=0.05)  # 1/zeta(1.5)
    poisson = draws(load(tmp_path, "{distribution: poisson, alpha: 0.5}", whole=True))
    assert min(poisson) == 1  # a conversation has a turn: a draw of 0 is 1
    think = draws(load(tmp_path, "{distribution: exponential, average: 2s, max: 5s}"))
    assert max(think) == 5.0
    assert min(think) >= 0


def test_a_far_tail_draws_its_cap_never_an_error(tmp_path):
    """A lognormal whose exp() overflows, a zipf near 1 whose draw passes any int: the cap, or the largest count."""
    wide = load(tmp_path, "{distribution: lognormal, mean: 50, sigma: 300, max: 600}", whole=True)
    assert max(draws(wide, 2000)) == 600
    uncapped = draws(load(tmp_path, "{distribution: lognormal, mean: 700, sigma: 5}"), 200)
    assert math.inf in uncapped
    heavy = draws(load(tmp_path, "{distribution: zipf, alpha: 1.0001}", whole=True), 2000)
    assert all(1 <= v <= sys.maxsize for v in heavy)


@pytest.mark.parametrize(
    "text",
    [
        "{distribution: uniform, min: 2, max: 9}",
        "{distribution: constant, value: 3}",
        "{distribution: poisson, alpha: 4.5, max: 10}",
        "{distribution: zipf, alpha: 2}",
        "{distribution: lognormal, average: 5, max: 40}",
        "{distribution: exponential, average: 3, max: 9}",
    ],
)
def test_run_jsons_record_reads_back_as_the_same_distribution(tmp_path, text):
    d = load(tmp_path, text, whole=True)
    again = load(tmp_path, json.dumps(d.to_json()), whole=True)
    assert again.name == d.name
    assert draws(again, 200) == pytest.approx(draws(d, 200))
    assert math.isfinite(json.loads(json.dumps(d.to_json())).get("max", 0))


@pytest.mark.parametrize(
    ("text", "whole", "where"),
    [
        ("{min: 1, max: 2}", True, "sessions.d.distribution: missing (one of constant"),
        ("{distribution: gauss}", True, "sessions.d.distribution: one of constant, uniform"),
        ("{distribution: uniform, min: 3}", True, "sessions.d.max: missing (uniform needs min, max)"),
        ("{distribution: uniform, min: 3, max: 2}", True, "sessions.d.max: below min (3)"),
        ("{distribution: uniform, min: 0, max: 2}", True, "sessions.d.min: must be a whole number >= 1, got 0"),
        ("{distribution: uniform, min: 1.5, max: 2}", True, "sessions.d.min: must be a whole number >= 1"),
        ("{distribution: constant, value: soon}", False, "sessions.d.value: bad duration 'soon'"),
        ("{distribution: constant, value: 2s}", True, "sessions.d.value: must be a number, got '2s'"),
        ("{distribution: poisson, alpha: 2, average: 3}", True, "sessions.d.average: not a field of poisson"),
        ("{distribution: zipf, alpha: 1}", True, "sessions.d.alpha: zipf needs alpha > 1, got 1"),
        ("{distribution: poisson, alpha: 10000000000000000000}", True, "sessions.d.alpha: at most 1e+09, got 1e+19"),
        ("{distribution: exponential, average: -1}", False, "sessions.d.average: must be >= 0, got -1"),
        ("{distribution: lognormal, average: 2, mean: 1}", True, "sessions.d.mean: give average (and median_ratio)"),
        ("{distribution: lognormal, mean: 1}", True, "sessions.d.sigma: missing (lognormal needs average"),
        ("{distribution: lognormal, average: 2, median_ratio: 1}", True, "sessions.d.median_ratio: between 0 and 1"),
        ("{distribution: lognormal, mean: 1, sigma: 1, median_ratio: 0.5}", True, "median_ratio: read only with"),
        ("0-3", True, "sessions.d: give whole numbers >= 1, got '0-3'"),
        ("[1, 2]", True, "sessions.d: give A, A-B or a mapping with 'distribution'"),
    ],
)
def test_a_bad_distribution_is_one_line_naming_file_line_and_field(tmp_path, text, whole, where):
    with pytest.raises(UsageError) as e:
        load(tmp_path, text, whole)
    assert str(e.value).startswith(f"{tmp_path / 'd.yaml'}:1: ")
    assert where in str(e.value)
    assert "\n" not in str(e.value)
