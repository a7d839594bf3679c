"""Prompts of a recorded size: exactly N tokens of the shipped tokenizer, in the request's language,
from its corpus; requests whose `hash_ids` share leading blocks share exactly those leading tokens.

The corpus is cut into the tokenizer's own pre-tokens (words, isolated punctuation, digits), each
with the tokens it has in the corpus; a pre-token's tokens do not depend on what is around it. A
block is a run of consecutive pre-tokens from a seeded place in the corpus, starting at a word that
begins with a space (so it starts a pre-token wherever it is put), topped up to its exact size with
the language's one-token punctuation. A prompt is its blocks in order, so its token ids are the
blocks' ids one after the other, and equal blocks are equal leading tokens.
"""

from __future__ import annotations

import random
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache

from llmchaos import languages, tokenizer

SPACE = "\u2581"  # the tokenizer's word-start mark
CACHED_BLOCKS = 4096  # hash ids' block texts kept for reuse (a shared prefix is built once)
PART_TOKENS = 8192  # a prompt is built this many tokens at a time (~5 ms): its builder may yield between


@dataclass(frozen=True)
class Corpus:
    """A language's corpus as pre-tokens, (text, tokens) each, and the one-token punctuation that
    tops a block up."""

    pieces: tuple[tuple[str, int], ...]
    filler: str

    @staticmethod
    @cache
    def of(lang: str) -> Corpus:
        tok, text = tokenizer.load(), languages.get(lang).text()
        text = tok.normalizer.normalize_str(text) if tok.normalizer else text
        words = [w.replace(SPACE, " ") for w, _ in tok.pre_tokenizer.pre_tokenize_str(text)]
        per_word = Counter(i for i in tok.encode(text, add_special_tokens=False).word_ids if i is not None)
        pieces = tuple((w, per_word[i]) for i, w in enumerate(words) if per_word[i] > 0)
        puncts = Counter(w for w, n in pieces if n == 1 and len(w) == 1 and unicodedata.category(w).startswith("P"))
        return Corpus(pieces, puncts.most_common(1)[0][0] if puncts else ".")

    def block(self, key: str, n: int) -> str:
        """`n` tokens (n >= 1) of consecutive pre-tokens from a place fixed by `key` (the same key and
        n, the same text; a smaller n, the first words of it). The first word is given a leading
        space, so it starts a pre-token wherever the block is put (its tokens counted so)."""
        pieces, total = self.pieces, len(self.pieces)
        i = random.Random(key).randrange(total)
        out: list[str] = []
        left = n
        for _ in range(total):  # the first word that fits, as a word of its own
            word = pieces[i][0] if pieces[i][0].startswith(" ") else " " + pieces[i][0]
            if (k := _count(word)) <= left:
                out.append(word)
                left -= k
                i = (i + 1) % total
                break
            i = (i + 1) % total
        else:
            out, left = [" "], left - 1  # a lone space is one token
        while left > 0:
            word, k = pieces[i]
            if k > left:
                out.append(self.filler * left)  # isolated punctuation: one token each
                break
            out.append(word)
            left -= k
            i = (i + 1) % total
        return "".join(out)


def warm(langs: Iterable[str]) -> None:
    """Read these languages' corpora now (tens of ms each), not while a schedule is running."""
    for lang in langs:
        Corpus.of(lang)


@cache
def _count(word: str) -> int:
    return tokenizer.count(word)


@lru_cache(maxsize=CACHED_BLOCKS)
def block(lang: str, key: str, n: int) -> str:
    return Corpus.of(lang).block(key, n)


def prompt(lang: str, tokens: int, key: str, hash_ids: tuple[int, ...] = (), block_tokens: int = 0) -> str:
    """A prompt of exactly `tokens` tokens (see `parts`)."""
    return "".join(parts(lang, tokens, key, hash_ids, block_tokens))


def parts(lang: str, tokens: int, key: str, hash_ids: tuple[int, ...] = (), block_tokens: int = 0) -> Iterator[str]:
    """A prompt of exactly `tokens` tokens, in parts of at most PART_TOKENS tokens (a builder may yield
    to the event loop between them: a million-token prompt takes about a second to build): one block
    per hash id (`block_tokens` each, the last what is left; tokens beyond the ids a block of their
    own), or, without ids, one block fixed by `key` (the request's own). `key` starts with the
    replay's pass over the log and a colon, so a looped log sends new prompts; a hash id's block is
    fixed by the id and the pass alone (a shorter use of the same id is its first words)."""
    if not hash_ids or block_tokens <= 0:
        yield from _long(lang, key, tokens, cached=False)
        return
    pass_ = key.split(":", 1)[0]
    left = tokens
    for h in hash_ids:
        if left <= 0:
            return
        n = min(block_tokens, left)
        yield from _long(lang, f"{pass_}:h{h}", n, cached=True)
        left -= n
    if left > 0:
        yield from _long(lang, key + ":rest", left, cached=False)


def _long(lang: str, key: str, n: int, cached: bool) -> Iterator[str]:
    """`n` tokens fixed by `key`, PART_TOKENS at a time: the first block keyed by `key` alone (so a
    block that fits in one part is what it always was), each next by `key` and its index; only the
    hash ids' blocks are kept for reuse (a request's own are built once)."""
    for j, at in enumerate(range(0, n, PART_TOKENS)):
        k, size = (key if j == 0 else f"{key}/{j}"), min(PART_TOKENS, n - at)
        yield block(lang, k, size) if cached else Corpus.of(lang).block(k, size)
