"""Prompts per language from the registry's corpora, and long-context prompts of a given length."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from collections.abc import Set as AbstractSet

from llmchaos import languages, tokenizer

LONG_CONTEXT_ASK = {
    "en": "Summarise the text above in three sentences.",
    "de": "Fasse den obigen Text in drei Sätzen zusammen.",
    "fr": "Résume le texte ci-dessus en trois phrases.",
    "es": "Resume el texto anterior en tres frases.",
    "it": "Riassumi il testo qui sopra in tre frasi.",
    "pt": "Resuma o texto acima em três frases.",
    "zh": "请用三句话总结上面的文字。",
    "ja": "上の文章を三文で要約してください。",
}


class PromptSource:
    """Seeded draws from a language's prompts, optionally filtered by size and category."""

    def __init__(
        self,
        lang: str,
        rng: random.Random,
        sizes: AbstractSet[str] | None = None,
        categories: AbstractSet[str] | None = None,
    ) -> None:
        prompts = [
            p["prompt"]
            for p in languages.get(lang).prompts()
            if (not sizes or p["size"] in sizes) and (not categories or p["category"] in categories)
        ]
        if not prompts:
            raise ValueError(f"no {lang} prompts match sizes={sizes} categories={categories}")
        self.prompts, self.rng = prompts, rng

    def next(self) -> str:
        return self.prompts[self.rng.randrange(len(self.prompts))]


class LongContextSource:
    """Generated prompts of `num_tokens` tokens each, instead of the corpus prompts."""

    def __init__(self, lang: str, num_tokens: int, rng: random.Random) -> None:
        self.lang, self.num_tokens, self.rng = lang, num_tokens, rng

    def next(self) -> str:
        return long_context(self.lang, self.num_tokens, self.rng)


class Prefixes:
    """The run's shared prompt prefixes (`--prefix-tokens N`, `--prefixes K`): user n of a
    language opens each of its requests with that language's prefix n (n mod K with K), each
    prefix built once."""

    def __init__(self, num_tokens: int, count: int, seed: int) -> None:
        self.num_tokens, self.count, self.seed = num_tokens, count, seed
        self._texts: dict[tuple[str, int], str] = {}

    def index(self, user: int) -> int:
        return user % self.count if self.count else user

    def text(self, lang: str, index: int) -> str:
        if (text := self._texts.get((lang, index))) is None:
            text = self._texts[lang, index] = shared_prefix(lang, self.num_tokens, self.seed, index)
        return text

    def open(self, lang: str, user: int, prompt: str) -> tuple[int, str]:
        """User `user`'s prefix index and `prompt` opened with its prefix."""
        i = self.index(user)
        return i, self.text(lang, i) + "\n\n" + prompt


def long_context(lang: str, num_tokens: int, rng: random.Random) -> str:
    """A prompt of about `num_tokens` tokens: the language's paragraphs in a seeded order, then an ask."""
    paragraphs = languages.get(lang).paragraphs()
    ask = LONG_CONTEXT_ASK.get(lang, LONG_CONTEXT_ASK["en"])
    draws = (paragraphs[rng.randrange(len(paragraphs))] for _ in itertools.count())
    return _text(draws, num_tokens - tokenizer.count(ask) - 1) + "\n\n" + ask


def shared_prefix(lang: str, num_tokens: int, seed: int, index: int) -> str:
    """Prefix `index` of the run's (`--prefix-tokens`): `num_tokens` tokens of the language's
    paragraphs, the same text for the same seed in every process. It opens with paragraph
    `index + offset` (the offset the seed's), so that prefixes differ from their first block
    while the language has paragraphs enough; the rest are seeded draws of its own."""
    paragraphs = languages.get(lang).paragraphs()
    first = (random.Random(f"{seed}:{lang}:prefixes").randrange(len(paragraphs)) + index) % len(paragraphs)
    rng = random.Random(f"{seed}:{lang}:prefix:{index}")
    draws = itertools.chain(
        [paragraphs[first]], (paragraphs[rng.randrange(len(paragraphs))] for _ in itertools.count())
    )
    return _text(draws, num_tokens)


def _text(paragraphs: Iterator[str], num_tokens: int) -> str:
    """Paragraphs taken in turn and joined, cut to `num_tokens` tokens."""
    parts, total = [], 0
    while total < num_tokens:
        p = next(paragraphs)
        parts.append(p)
        total += tokenizer.count(p) + 1
    ids = tokenizer.encode("\n\n".join(parts))[: max(0, num_tokens)]
    return tokenizer.decode(ids)
