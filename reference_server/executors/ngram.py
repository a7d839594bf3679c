"""Per-language token trigram model (bigram backoff) over the shipped tokenizer's ids.

It is the sim executor's "model": next-token candidates with counts, sampled with
temperature, top-k, top-p and a per-request seed exactly as a real sampler treats
logits (count ** (1 / T) is softmax(log count / T), computed relative to the top count so
that no temperature overflows it).
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from itertools import accumulate

from llmchaos import tokenizer
from reference_server.sequence import SamplingParams

Candidates = tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]  # ids, counts, cum counts


def _table(counts: dict) -> dict:
    out = {}
    for key, c in counts.items():
        ranked = c.most_common()
        ids = tuple(t for t, _ in ranked)
        weights = tuple(float(n) for _, n in ranked)
        out[key] = (ids, weights, tuple(accumulate(weights)))
    return out


class NGramModel:
    def __init__(self, paragraphs: list[str]) -> None:
        self.bos, self.eos = -1, tokenizer.eos_id()
        tri: dict[tuple[int, int], Counter] = defaultdict(Counter)
        bi: dict[int, Counter] = defaultdict(Counter)
        for text in paragraphs:
            ids = [self.bos, self.bos, *tokenizer.encode(text), self.eos]
            for a, b, c in zip(ids, ids[1:], ids[2:], strict=False):
                tri[(a, b)][c] += 1
                bi[b][c] += 1
        self.tri, self.bi = _table(tri), _table(bi)
        self.starts: tuple[int, ...] = self.tri[(self.bos, self.bos)][0]

    def first_token(self, prompt_ids: list[int], params: SamplingParams, rng: random.Random) -> int:
        """A paragraph start: greedy decoding picks it by the prompt, so equal prompts begin alike."""
        if params.temperature == 0:
            return self.starts[hash(tuple(prompt_ids[-64:])) % len(self.starts)]
        return self.sample(self.bos, self.bos, params, rng, allow_eos=False)

    def candidates(self, a: int, b: int) -> Candidates:
        return self.tri.get((a, b)) or self.bi.get(b) or self.tri[(self.bos, self.bos)]

    def sample(self, a: int, b: int, params: SamplingParams, rng: random.Random, allow_eos: bool) -> int:
        ids, counts, cum = self.candidates(a, b)
        if not allow_eos and self.eos in ids:
            keep = [i for i, t in enumerate(ids) if t != self.eos]
            if not keep:
                return self.starts[rng.randrange(len(self.starts))]
            ids, counts = tuple(ids[i] for i in keep), tuple(counts[i] for i in keep)
            cum = ()
        if params.temperature == 0:
            return ids[0]
        if params.temperature != 1.0 or params.top_k or params.top_p < 1.0:
            counts = _reshape(counts, params)
            ids, cum = ids[: len(counts)], ()
        return rng.choices(ids, cum_weights=cum or tuple(accumulate(counts)))[0]


def _reshape(counts: tuple[float, ...], p: SamplingParams) -> tuple[float, ...]:
    """Temperature, then top-k, then top-p (nucleus) on counts sorted high to low."""
    w = _tempered(counts, p.temperature) if p.temperature != 1.0 else list(counts)
    if p.top_k:
        w = w[: p.top_k]
    if p.top_p < 1.0:
        total, run = sum(w), 0.0
        for i, x in enumerate(w):
            run += x
            if run >= p.top_p * total:
                w = w[: i + 1]
                break
    return tuple(w)


def _tempered(counts: tuple[float, ...], temperature: float) -> list[float]:
    """(c / top) ** (1 / T) in log space: every weight in [0, 1], the top one 1, for any T > 0."""
    top = math.log(counts[0])
    return [math.exp((math.log(c) - top) / temperature) for c in counts]
