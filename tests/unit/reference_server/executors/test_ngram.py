import random
from collections import Counter

import pytest

from llmchaos import languages
from reference_server.executors.ngram import NGramModel
from reference_server.sequence import SamplingParams


@pytest.fixture(scope="module")
def model() -> NGramModel:
    return NGramModel(languages.get("en").paragraphs())


def context(model: NGramModel) -> tuple[int, int]:
    return next((a, b) for (a, b), (ids, _, _) in model.tri.items() if len(ids) >= 3 and a != model.bos)


def test_temperature_zero_is_the_most_likely_token(model):
    a, b = context(model)
    ids, counts, _ = model.candidates(a, b)
    p = SamplingParams(temperature=0)
    picks = {model.sample(a, b, p, random.Random(i), True) for i in range(20)}
    assert picks == {ids[counts.index(max(counts))]}


def test_top_k_one_and_tiny_top_p_are_greedy(model):
    a, b = context(model)
    greedy = model.sample(a, b, SamplingParams(temperature=0), random.Random(0), True)
    for p in (SamplingParams(top_k=1), SamplingParams(top_p=1e-6)):
        assert {model.sample(a, b, p, random.Random(i), True) for i in range(20)} == {greedy}


def test_top_k_limits_the_candidates(model):
    a, b = context(model)
    ids = model.candidates(a, b)[0]
    picks = {model.sample(a, b, SamplingParams(top_k=2), random.Random(i), True) for i in range(200)}
    assert picks <= set(ids[:2])


def test_high_temperature_flattens_the_distribution(model):
    a, b = next(
        (a, b) for (a, b), (ids, counts, _) in model.tri.items() if len(ids) >= 2 and counts[0] >= 3 * counts[1]
    )
    top = model.candidates(a, b)[0][0]

    def share(t: float) -> float:
        rng = random.Random(1)
        picks = Counter(model.sample(a, b, SamplingParams(temperature=t), rng, True) for _ in range(2000))
        return picks[top] / 2000

    assert share(2.0) < share(1.0) < share(0.3)


def test_eos_is_never_sampled_when_disallowed(model):
    rng = random.Random(3)
    for a, b in list(model.tri)[:500]:
        assert model.sample(a, b, SamplingParams(), rng, allow_eos=False) != model.eos


@pytest.mark.parametrize("t", [0.001, 1e-6, 1e-300])
def test_tiny_temperature_samples_greedily_without_overflow(model, t):
    """count ** (1/T) overflowed a float below T ~ 0.005; the softmax must stay finite."""
    a, b = next(
        (a, b) for (a, b), (ids, counts, _) in model.tri.items() if len(ids) >= 2 and counts[0] > counts[1] >= 3
    )
    greedy = model.sample(a, b, SamplingParams(temperature=0), random.Random(0), True)
    picks = {model.sample(a, b, SamplingParams(temperature=t), random.Random(i), True) for i in range(20)}
    assert picks == {greedy}


def test_tiny_temperature_keeps_ties_between_the_top_tokens(model):
    """Equal top counts stay equally likely at any temperature (greedy would hide one of them)."""
    a, b = next((a, b) for (a, b), (ids, counts, _) in model.tri.items() if len(ids) == 2 and counts[0] == counts[1])
    rng = random.Random(2)
    picks = Counter(model.sample(a, b, SamplingParams(temperature=0.001), rng, True) for _ in range(400))
    assert set(picks) == set(model.candidates(a, b)[0])
