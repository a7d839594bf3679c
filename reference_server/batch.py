"""One engine step's work, as the scheduler hands it to an executor."""

from __future__ import annotations

from dataclasses import dataclass, field

from reference_server.sequence import Sequence


@dataclass
class Batch:
    """One step's work: (sequence, tokens to compute) pairs, with the sums the cost model needs."""

    items: list[tuple[Sequence, int]] = field(default_factory=list)
    sampling: list[Sequence] = field(default_factory=list)  # chunk reaches the last token: sample
    num_prefill_tokens: int = 0
    num_decode_seqs: int = 0
    num_context_tokens: int = 0

    def add(self, seq: Sequence, n: int) -> None:
        self.items.append((seq, n))
        uncomputed = seq.num_uncomputed_tokens
        if n == uncomputed:
            self.sampling.append(seq)
        if n == 1 and uncomputed == 1 and seq.output_token_ids:
            self.num_decode_seqs += 1
        else:
            self.num_prefill_tokens += n
        self.num_context_tokens += seq.num_computed_tokens + n

    def __bool__(self) -> bool:
        return bool(self.items)
