"""Prompts per language from the registry's corpora, and long-context prompts of a given length."""

from __future__ import annotations

import random
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


def long_context(lang: str, num_tokens: int, rng: random.Random) -> str:
    """A prompt of about `num_tokens` tokens: the language's paragraphs in a seeded order, then an ask."""
    paragraphs = languages.get(lang).paragraphs()
    ask = LONG_CONTEXT_ASK.get(lang, LONG_CONTEXT_ASK["en"])
    parts, total = [], tokenizer.count(ask)
    while total < num_tokens:
        p = paragraphs[rng.randrange(len(paragraphs))]
        parts.append(p)
        total += tokenizer.count(p) + 1
    text = "\n\n".join(parts)
    ids = tokenizer.encode(text)[: max(0, num_tokens - tokenizer.count(ask) - 1)]
    return tokenizer.decode(ids) + "\n\n" + ask
