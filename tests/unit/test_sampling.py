import asyncio
import random
from collections import Counter

import pytest

from llmchaos import languages, tokenizer
from reference_server.config import EngineConfig
from reference_server.engine import Engine, _holdback
from reference_server.executors.ngram import NGramModel
from reference_server.executors.sim import CostModel, SimExecutor
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
    a, b = next((a, b) for (a, b), (ids, counts, _) in model.tri.items()
                if len(ids) >= 2 and counts[0] >= 3 * counts[1])
    top = model.candidates(a, b)[0][0]

    def share(t: float) -> float:
        rng = random.Random(1)
        picks = Counter(model.sample(a, b, SamplingParams(temperature=t), rng, True) for _ in range(2000))
        return picks[top] / 2000

    assert share(2.0) < share(1.0) < share(0.3)


def test_eos_is_never_sampled_when_disallowed(model):
    rng = random.Random(3)
    for (a, b), (ids, _, _) in list(model.tri.items())[:500]:
        assert model.sample(a, b, SamplingParams(), rng, allow_eos=False) != model.eos


def test_holdback_keeps_back_a_possible_stop_prefix():
    assert _holdback("hello wor", ("world",)) == 3
    assert _holdback("hello", ("xyz",)) == 0
    assert _holdback("ab", ("abc", "bq")) == 2


def run(engine_cfg: EngineConfig, params: SamplingParams, prompt: str = "Hello there",
        lang: str = "en") -> tuple[list[str], str | None, int]:
    async def go():
        engine = Engine(engine_cfg, SimExecutor(CostModel.zero()))
        engine.start()
        engine.state = "ready"
        seq = engine.submit(tokenizer.encode(prompt), params, lang)
        texts, reason = [], None
        async for d in engine.deltas(seq):
            texts.append(d.text)
            reason = d.finish_reason
        await engine.stop()
        return texts, reason, len(seq.output_token_ids)
    return asyncio.run(go())


FREE = EngineConfig()


def test_seeded_requests_repeat_and_differ_by_seed():
    a = "".join(run(FREE, SamplingParams(max_tokens=30, seed=5, ignore_eos=True))[0])
    b = "".join(run(FREE, SamplingParams(max_tokens=30, seed=5, ignore_eos=True))[0])
    c = "".join(run(FREE, SamplingParams(max_tokens=30, seed=6, ignore_eos=True))[0])
    assert a == b and a != c


def test_stop_string_cuts_text_and_is_never_streamed():
    full = "".join(run(FREE, SamplingParams(max_tokens=60, temperature=0, ignore_eos=True))[0])
    stop = full[25:29]
    assert stop.strip() and full.find(stop) == 25
    texts, reason, _ = run(FREE, SamplingParams(max_tokens=60, temperature=0, ignore_eos=True, stop=(stop,)))
    assert "".join(texts) == full[:25] and reason == "stop"
    assert all(stop not in "".join(texts[:i + 1]) for i in range(len(texts)))


def test_max_tokens_and_min_tokens():
    _, reason, n = run(FREE, SamplingParams(max_tokens=17, ignore_eos=True))
    assert (reason, n) == ("length", 17)
    for seed in range(5):
        _, reason, n = run(FREE, SamplingParams(max_tokens=400, min_tokens=40, seed=seed))
        assert n >= 40


def test_output_is_in_the_requested_language():
    zh = "".join(run(FREE, SamplingParams(max_tokens=40, seed=1, ignore_eos=True), lang="zh")[0])
    assert sum("\u4e00" <= ch <= "\u9fff" for ch in zh) > len(zh) / 2
