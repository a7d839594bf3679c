"""Sampling on the device: temperature, top-k, top-p and a seeded draw, a batch at a time.

Each sampled row brings its own uniform number (from the request's seeded RNG, or the
executor's), so a seeded request draws the same tokens whatever it is batched with. A random
model samples within its request's language vocabulary (the tokens of that language's corpus).
Stop strings are the engine's: it checks the detokenized text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import torch

from llmchaos import languages, tokenizer
from reference_server.sequence import SamplingParams

GREEDY_BELOW = 1e-5  # a temperature under this is greedy (vLLM's _SAMPLING_EPS)


@dataclass(frozen=True)
class Draw:
    params: SamplingParams
    lang: str
    allow_eos: bool
    uniform: float  # in [0, 1): the draw's position in the sampled distribution


class Sampler:
    def __init__(
        self,
        vocab_size: int,
        eos: int,
        vocabularies: dict[str, torch.Tensor],
        device: torch.device,
        eos_probability: float | None = None,
    ) -> None:
        """`vocabularies`: per language, a bool [vocab_size] of the tokens it may sample (none: all).
        `eos_probability`: the end-of-reply chance per token at temperature 1 that a random model is
        given, so that its replies end at natural lengths (None: the model's own)."""
        self.vocab_size, self.eos, self.device = vocab_size, eos, device
        self.vocabularies = vocabularies
        self.eos_logit_offset = None if eos_probability is None else math.log(eos_probability / (1 - eos_probability))
        self._all = torch.ones(vocab_size, dtype=torch.bool, device=device)

    def sample(self, logits: torch.Tensor, rows: Seq[Draw]) -> list[int]:
        """One token per row of `logits` ([rows, vocab], float32)."""
        d = self.device
        allowed = torch.stack([self.vocabularies.get(r.lang, self._all) for r in rows])
        allowed[:, self.eos] = torch.tensor([r.allow_eos for r in rows], device=d)
        logits = logits[:, : self.vocab_size].masked_fill(~allowed, -torch.inf)
        temperature = torch.tensor([r.params.temperature for r in rows], device=d)
        greedy = temperature < GREEDY_BELOW  # logits / 1e-38 are infinite: softmax's inf - inf is NaN
        if self.eos_logit_offset is not None:
            # p = e^x / (e^x + the others' sum) when x = their logsumexp + log(p / (1 - p)). Not for greedy
            # rows: over a flat random distribution EOS at 1/64 would beat every token, every time.
            others = torch.cat([logits[:, : self.eos], logits[:, self.eos + 1 :]], dim=-1).logsumexp(dim=-1)
            chance = torch.where(allowed[:, self.eos], others + self.eos_logit_offset, -torch.inf)
            logits[:, self.eos] = torch.where(greedy, logits[:, self.eos], chance)
        logits = logits / torch.where(greedy, 1.0, temperature)[:, None]
        if any(r.params.top_k > 0 for r in rows):
            logits = _top_k(logits, torch.tensor([r.params.top_k for r in rows], device=d))
        if any(r.params.top_p < 1.0 for r in rows):
            logits = _top_p(logits, torch.tensor([r.params.top_p for r in rows], device=d))
        probs = torch.softmax(logits, dim=-1)
        cdf = probs.cumsum(dim=-1)
        u = torch.tensor([r.uniform for r in rows], device=d, dtype=cdf.dtype)  # u near 1 rounds to 1.0 here
        drawn = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0]
        last = self.vocab_size - 1 - probs.flip(-1).gt(0).int().argmax(dim=-1)  # the last token it may draw
        drawn = torch.minimum(drawn, last)
        return torch.where(greedy, logits.argmax(dim=-1), drawn).tolist()


def _top_k(logits: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Keep each row's k best logits (k = 0: all)."""
    k = torch.where(k > 0, k, logits.shape[-1]).clamp(max=logits.shape[-1])
    kth = logits.sort(dim=-1, descending=True).values.gather(1, (k - 1)[:, None])
    return logits.masked_fill(logits < kth, -torch.inf)


def _top_p(logits: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Keep each row's smallest set of best tokens whose probability reaches p (the best one always)."""
    ordered, order = logits.sort(dim=-1, descending=True)
    probs = torch.softmax(ordered, dim=-1)
    before = probs.cumsum(dim=-1) - probs  # probability of the better tokens
    drop = before >= p[:, None]
    drop[:, 0] = False
    ordered = ordered.masked_fill(drop, -torch.inf)
    return torch.full_like(logits, -torch.inf).scatter(1, order, ordered)


def language_vocabularies(vocab_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    """Per language, the text tokens of its corpus (no special or byte tokens)."""
    pieces, out = tokenizer.pieces(), {}
    for tag, lang in languages.registry().items():
        encodings = tokenizer.load().encode_batch(lang.paragraphs(), add_special_tokens=False)
        ids = sorted({t for e in encodings for t in e.ids if pieces[t]})
        mask = torch.zeros(vocab_size, dtype=torch.bool, device=device)
        mask[ids] = True
        out[tag] = mask
    return out
