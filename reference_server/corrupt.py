"""The admin fault `corrupt`: a model that has lost its GPU and answers 200 with garbage.

A request that arrives while it is set (`PUT /admin/faults/corrupt`) shows every token it emits to
its end, thinking or answer, as the token GARBAGE[(n - 1) % len(GARBAGE)], n its position in the
output (1: the first), a fixed cycle of punctuation-only tokens of the serving tokenizer. A request
already in flight when it is set or cleared keeps what it had, so a request's start says whether it
was corrupted, as with the SSE proxy's faults. The garbage depends on neither the prompt nor the
model, the same request gets the same garbage every time, and nothing else changes: the model still
samples its own tokens (its KV, its context, its EOS), so the number of tokens, the timing and the
usage figures are what they would have been, an answer still ends at max_tokens or at the model's
EOS, and a stop string is looked for in the garbage the client sees. No garbage token is EOS (a
special token has no surface text)."""

from __future__ import annotations

import string
from itertools import islice

CYCLE = "#%*+=?!$<>"  # one-character tokens of the shipped tokenizer, in this order


def garbage_ids(pieces: list[str]) -> tuple[int, ...]:
    """The ids the cycle is made of, from `pieces` (each id's surface text, '' for special tokens):
    the first id of each CYCLE character the vocabulary has; for a tokenizer that has none of them
    (a local model's), its first ten punctuation-only tokens. Empty: no garbage can be shown."""
    first: dict[str, int] = {}
    for i, p in enumerate(pieces):
        first.setdefault(p, i)
    found = tuple(first[c] for c in CYCLE if c in first)
    if found:
        return found
    punct = (i for i, p in enumerate(pieces) if p and all(c in string.punctuation for c in p))
    return tuple(islice(punct, len(CYCLE)))
