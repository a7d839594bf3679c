import random

import pytest

from llmchaos import tokenizer
from loadtests.prompts import LongContextSource, PromptSource


@pytest.mark.parametrize(("lang", "n"), [("en", 800), ("de", 1500), ("ja", 3000)])
def test_long_context_prompts_have_the_requested_length(lang, n):
    src = LongContextSource(lang, n, random.Random(2))
    a, b = src.next(), src.next()
    assert a != b
    assert abs(tokenizer.count(a) - n) <= 2
    assert abs(tokenizer.count(b) - n) <= 2


def test_prompt_draws_are_seeded_and_filtered_by_size():
    a = [PromptSource("fr", random.Random(5), {"short"}).next() for _ in range(3)]
    b = [PromptSource("fr", random.Random(5), {"short"}).next() for _ in range(3)]
    assert a == b
    assert all(len(p.split()) < 30 for p in a)
    with pytest.raises(ValueError, match="no fr prompts"):
        PromptSource("fr", random.Random(0), {"huge"})
