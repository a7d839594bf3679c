"""Who goes where: the A/B split by FNV-1a 64 of the user id, the language of a user the log gives
none, sampling whole users, the worker of a session; each fixed by the id alone."""

from collections import Counter

import pytest

from llmchaos.errors import UsageError
from loadtests.logs import split

IDS = [f"user-{i}" for i in range(100_000)]


def test_fnv1a64_reference_values():
    # The FNV reference vectors (draft-eastlake-fnv): "", "a", "foobar".
    assert split.fnv1a64(b"") == 0xCBF29CE484222325
    assert split.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert split.fnv1a64(b"foobar") == 0x85944171F73967E8
    assert split.bucket("foobar") == 0x85944171F73967E8 % 100


@pytest.mark.parametrize("n", [1, 10, 25, 50, 90])
def test_the_share_sent_to_b_is_n_percent(n):
    to_b = sum(split.side(u, n) == "b" for u in IDS)
    assert abs(to_b / len(IDS) - n / 100) <= 0.005


def test_a_user_always_lands_on_the_same_side_and_the_salt_moves_users():
    first = [split.side(u, 30) for u in IDS[:20_000]]
    assert first == [split.side(u, 30) for u in IDS[:20_000]]
    salted = [split.side(u, 30, salt="exp-2") for u in IDS[:20_000]]
    moved = sum(a != b for a, b in zip(first, salted, strict=True)) / len(first)
    assert 0.35 < moved < 0.49  # independent draws at 30 %: 2 * 0.3 * 0.7 = 0.42 of users change side
    assert split.side("u", 0) == "a"
    assert split.side("u", 100) == "b"


def test_languages_by_the_mix_stable_per_user_and_independent_of_the_side():
    mix = split.LangMix.parse("en=10,zh=6,ja=4")
    langs = [mix.pick(u) for u in IDS[:40_000]]
    share = Counter(langs)
    for tag, w in {"en": 0.5, "zh": 0.3, "ja": 0.2}.items():
        assert abs(share[tag] / len(langs) - w) < 0.01
    assert langs == [mix.pick(u) for u in IDS[:40_000]]
    on_b = [lang for u, lang in zip(IDS, langs, strict=False) if split.side(u, 50) == "b"]
    assert abs(Counter(on_b)["en"] / len(on_b) - 0.5) < 0.015  # B gets the same mix as A
    assert Counter(mix.pick(u, seed=1) for u in IDS[:40_000]) != share


def test_the_default_mix_is_the_registry_and_bad_mixes_name_the_flag():
    from llmchaos import languages

    assert split.LangMix.parse("").tags == tuple(languages.registry())
    for bad, why in [("en=0", "weight > 0"), ("xx=1", "unknown language 'xx'"), ("en", "lang=weight"), (",", "no")]:
        with pytest.raises(UsageError, match=f"--lang-mix: .*{why}"):
            split.LangMix.parse(bad)


def test_sampling_keeps_whole_users_and_shards_cover_everyone_once():
    kept = [u for u in IDS[:20_000] if split.sampled(u, 0.25)]
    assert abs(len(kept) / 20_000 - 0.25) < 0.01
    assert kept == [u for u in IDS[:20_000] if split.sampled(u, 0.25)]
    shards = Counter(split.shard(u, 3) for u in IDS[:30_000])
    assert set(shards) == {0, 1, 2}
    assert all(abs(n / 30_000 - 1 / 3) < 0.01 for n in shards.values())
    assert {split.shard(u, 1) for u in IDS[:100]} == {0}
