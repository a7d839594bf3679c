import random

import pytest

from llmchaos import tokenizer
from loadtests.adapters import ADAPTERS
from loadtests.prompts import LongContextSource, Prefixes, PromptSource, shared_prefix
from loadtests.sources import Loop
from reference_server.cluster.policies import prompt_text
from tests.unit.loadtests.test_options import settings


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


@pytest.mark.parametrize(("lang", "n"), [("en", 2000), ("de", 500), ("zh", 1200), ("ja", 64)])
def test_a_shared_prefix_is_its_length_in_tokens_and_the_same_for_the_seed(lang, n):
    texts = [shared_prefix(lang, n, 3, i) for i in range(3)]
    assert texts == [shared_prefix(lang, n, 3, i) for i in range(3)]  # in any process: no state but the seed
    assert texts != [shared_prefix(lang, n, 4, i) for i in range(3)]
    for text in texts:
        assert abs(tokenizer.count(text) - n) <= 2
    # each its own from its first block on (a router hashes the leading 64 characters)
    assert len({t[:64] for t in texts}) == len(texts)


def test_a_users_prefix_is_its_numbers_one_per_user_or_shared_among_k():
    each, shared = Prefixes(100, 0, 1), Prefixes(100, 2, 1)
    assert [each.index(u) for u in range(4)] == [0, 1, 2, 3]
    assert [shared.index(u) for u in range(4)] == [0, 1, 0, 1]
    i, prompt = shared.open("fr", 3, "Bonjour ?")
    assert i == 1
    assert prompt == shared_prefix("fr", 100, 1, 1) + "\n\nBonjour ?"
    assert shared.open("fr", 1, "Salut")[1].startswith(shared.text("fr", 1))


@pytest.mark.parametrize("api", sorted(ADAPTERS))
def test_the_loop_opens_every_prompt_of_a_user_with_its_prefix(api):
    s = settings("--api", api, "--langs", "de", "--prefix-tokens", "300", "--prefixes", "3", "--seed", "9")
    loop = Loop(s, "http://target")
    loop.configure(s, "http://target", is_worker=False)
    for user in [0, 1, 2, 3, 4, 4]:
        due = loop.next("de", user)
        assert due.prefix == user % 3
        assert due.call is not None
        assert prompt_text(due.call.body).startswith(shared_prefix("de", 300, 9, user % 3) + "\n\n")
    plain = settings("--api", api, "--langs", "de")
    loop.configure(plain, "http://target", is_worker=False)
    assert loop.next("de", 0).prefix is None
