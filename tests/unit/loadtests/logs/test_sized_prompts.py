"""Prompts of a recorded size: exactly N tokens of the shipped tokenizer, in the language's own text;
equal hash ids give equal leading tokens (what a prefix cache sees), other ids other tokens."""

import random

import pytest

from llmchaos import languages, tokenizer
from loadtests.logs import sized_prompts

LANGS = list(languages.registry())


@pytest.mark.parametrize("lang", LANGS)
def test_exactly_the_recorded_number_of_tokens(lang):
    rng = random.Random(lang)
    sizes = [1, 2, 3, 7, 16, 511, 512, 513, 4097] + [rng.randrange(1, 20_000) for _ in range(20)]
    for i, n in enumerate(sizes):
        text = sized_prompts.prompt(lang, n, f"0:{i}")
        assert tokenizer.count(text) == n, (lang, n, text[:80])


@pytest.mark.parametrize("lang", LANGS)
def test_the_language_s_own_text(lang):
    corpus = languages.get(lang).text()
    text = sized_prompts.prompt(lang, 3000, "0:1")
    units = text.split() if lang not in ("zh", "ja") else list(text.replace(" ", ""))
    known = set(corpus.split()) if lang not in ("zh", "ja") else set(corpus)
    assert sum(u in known or u.rstrip(",.，、。") in known for u in units) / len(units) > 0.95
    others = set(languages.get("en" if lang != "en" else "de").text().split())
    assert sum(u in others for u in units) / len(units) < 0.5


@pytest.mark.parametrize("lang", ["en", "de", "zh", "ja"])
def test_shared_hash_ids_are_shared_leading_tokens(lang):
    rng = random.Random(7)
    for trial in range(25):
        common = [rng.randrange(1000) for _ in range(rng.randrange(1, 4))]
        a, b = (*common, 10_000 + trial), (*common, 20_000 + trial, 30_000 + trial)
        na, nb = 512 * (len(a) - 1) + rng.randrange(1, 513), 512 * (len(b) - 1) + rng.randrange(1, 513)
        ta = tokenizer.encode(sized_prompts.prompt(lang, na, f"0:a{trial}", a, 512))
        tb = tokenizer.encode(sized_prompts.prompt(lang, nb, f"0:b{trial}", b, 512))
        k = 512 * len(common)
        assert (len(ta), len(tb)) == (na, nb)
        assert ta[:k] == tb[:k]
        assert ta[k : k + 16] != tb[k : k + 16]  # the next block is another one


def test_a_key_fixes_the_text_and_each_pass_over_the_log_has_its_own():
    assert sized_prompts.prompt("en", 300, "0:12") == sized_prompts.prompt("en", 300, "0:12")
    assert sized_prompts.prompt("en", 300, "0:12") != sized_prompts.prompt("en", 300, "0:13")
    assert sized_prompts.prompt("en", 600, "0:1", (5, 6), 512) != sized_prompts.prompt("en", 600, "1:1", (5, 6), 512)
    # tokens beyond the hash ids are a block of the request's own
    assert tokenizer.count(sized_prompts.prompt("fr", 1500, "0:9", (1, 2), 512)) == 1500


def test_warm_reads_the_corpora_ahead():
    sized_prompts.Corpus.of.cache_clear()
    sized_prompts.block.cache_clear()
    sized_prompts.warm(["en", "zh"])
    assert sized_prompts.Corpus.of.cache_info().currsize == 2
    before = sized_prompts.Corpus.of.cache_info().hits
    sized_prompts.prompt("zh", 40, "0:1")
    assert sized_prompts.Corpus.of.cache_info().hits == before + 1  # the prompt found it read
