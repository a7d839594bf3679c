"""Sampling on the device (reference_server/executors/torch/sampler.py)."""

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from llmchaos import tokenizer
from reference_server.executors.torch.sampler import Draw, Sampler, language_vocabularies
from reference_server.sequence import SamplingParams

CPU = torch.device("cpu")
V = tokenizer.load().get_vocab_size()
EOS = tokenizer.eos_id()
VOCABS = language_vocabularies(V, CPU)
SAMPLER = Sampler(V, EOS, VOCABS, CPU)
LOGITS = torch.randn(V, generator=torch.Generator().manual_seed(1)) * 3


def _row(lang: str = "en", allow_eos: bool = False, u: float = 0.5, **params) -> Draw:
    return Draw(SamplingParams(**params), lang, allow_eos, u)


def test_each_language_samples_its_own_corpus_text_tokens():
    pieces = tokenizer.pieces()
    zh = VOCABS["zh"].nonzero()[:, 0].tolist()
    assert all(pieces[t] for t in zh)  # no special or byte token
    cjk = sum(any("\u4e00" <= c <= "\u9fff" for c in pieces[t]) for t in zh)
    assert cjk > 0.6 * len(zh)
    assert not (VOCABS["zh"] & VOCABS["en"]).all()


def test_greedy_is_the_best_token_of_the_language_and_eos_only_when_allowed():
    allowed = VOCABS["de"].clone()
    best = LOGITS.masked_fill(~allowed, -torch.inf).argmax().item()
    assert SAMPLER.sample(LOGITS[None], [_row("de", temperature=0)]) == [best]
    eos_best = LOGITS.clone()
    eos_best[EOS] = 100
    assert SAMPLER.sample(eos_best[None], [_row("de", temperature=0)]) == [best]
    assert SAMPLER.sample(eos_best[None], [_row("de", allow_eos=True, temperature=0)]) == [EOS]


def test_draws_follow_the_softmax_at_the_temperature():
    """A grid of uniform draws lands on each token as often as its probability says (inverse CDF)."""
    # The grid is no sample: every token gets n * p within 1 (float32 rounding inside 1.5), whatever n,
    # so it never fails by chance. n sets what it can see: any token off by 2.5 / n in probability (a
    # temperature of 0.71 for 0.7 moves the best token by 0.012: 47 draws of 4000; tail mass dropped
    # beyond 0.2 % shows on the best token too). 20000 rows cost 5 times as much and saw nothing more.
    n, lang = 4000, "fr"
    probs = torch.softmax(LOGITS.masked_fill(~VOCABS[lang], -torch.inf) / 0.7, -1)
    rows = [_row(lang, u=(i + 0.5) / n, temperature=0.7) for i in range(n)]
    counts = torch.bincount(torch.tensor(SAMPLER.sample(LOGITS.expand(n, V), rows)), minlength=V)
    assert (counts - probs * n).abs().max() <= 1.5


def test_top_k_and_top_p_keep_the_best_tokens():
    lang = "en"
    masked = LOGITS.masked_fill(~VOCABS[lang], -torch.inf)
    top5 = set(masked.topk(5).indices.tolist())
    draws = {SAMPLER.sample(LOGITS[None], [_row(lang, u=i / 200, top_k=5)])[0] for i in range(200)}
    assert draws == top5
    probs = torch.softmax(masked, -1)
    ordered = probs.sort(descending=True)
    need = int((ordered.values.cumsum(0) < 0.5).sum()) + 1  # the fewest best tokens reaching 0.5
    nucleus = set(ordered.indices[:need].tolist())
    draws = {SAMPLER.sample(LOGITS[None], [_row(lang, u=i / 500, top_p=0.5)])[0] for i in range(500)}
    assert draws == nucleus


def test_the_same_draw_gives_the_same_token_whatever_the_batch():
    rows = [_row("ja", u=0.3, temperature=1.2, top_p=0.9), _row("en", u=0.8, temperature=0.5, top_k=40)]
    alone = [SAMPLER.sample(LOGITS[None], [r])[0] for r in rows]
    assert SAMPLER.sample(LOGITS.expand(2, V), rows) == alone


@pytest.mark.fuzz
@given(
    lang=st.sampled_from(sorted(VOCABS)),
    temperature=st.floats(0, 2),
    top_k=st.integers(0, V + 10),
    top_p=st.floats(0.01, 1.0),
    u=st.floats(0, 1, exclude_max=True),
    allow_eos=st.booleans(),
)
@example(lang="en", temperature=1.0, top_k=0, top_p=1.0, u=0.9999999999, allow_eos=False)
@example(lang="de", temperature=1.0, top_k=0, top_p=1.0, u=0.9999999999999999, allow_eos=False)  # 1.0 in float32
@example(lang="en", temperature=1.1754943508222875e-38, top_k=0, top_p=1.0, u=0.0, allow_eos=False)  # inf logits
def test_any_params_give_a_token_the_language_allows(lang, temperature, top_k, top_p, u, allow_eos):
    row = _row(lang, allow_eos, u, temperature=temperature, top_k=top_k, top_p=top_p)
    (token,) = SAMPLER.sample(LOGITS[None], [row])
    assert VOCABS[lang][token] or (allow_eos and token == EOS)
    if top_k > 0:
        masked = LOGITS.masked_fill(~VOCABS[lang], -torch.inf)
        if allow_eos:
            masked[EOS] = LOGITS[EOS]
        assert LOGITS[token] >= masked.topk(min(top_k, V)).values[-1]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_random_models_replies_end_with_the_given_probability_per_token(lang):
    sampler = Sampler(V, EOS, VOCABS, CPU, eos_probability=1 / 64)
    n = 6400
    draws = sampler.sample(LOGITS.expand(n, V), [_row(lang, allow_eos=True, u=(i + 0.5) / n) for i in range(n)])
    assert abs(draws.count(EOS) - n / 64) <= 1
    held = sampler.sample(LOGITS.expand(n, V), [_row(lang, allow_eos=False, u=(i + 0.5) / n) for i in range(n)])
    assert EOS not in held
    flat = LOGITS / 100  # where EOS at 1/64 would be the likeliest token: greedy still keeps the model's own
    assert sampler.sample(flat[None], [_row(lang, allow_eos=True, temperature=0)]) == SAMPLER.sample(
        flat[None], [_row(lang, allow_eos=True, temperature=0)]
    )
