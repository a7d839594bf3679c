"""One scheduled batch as one forward pass: chunked prefills and decodes side by side."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from reference_server.batch import Batch
from reference_server.executors.torch.attention import STEP, Group, PagedStep
from reference_server.executors.torch.kv_cache import PagedKVCache


@dataclass(frozen=True)
class Work:
    """A sequence's share of a step, copied on the event loop (an abort may clear its block table
    while the step runs in its thread)."""

    tokens: list[int]  # the tokens to compute, at positions start, start + 1, ...
    start: int
    block_table: list[int]
    sample: bool  # the chunk ends the sequence's known tokens: its logits are sampled


def snapshot(batch: Batch) -> list[Work]:
    sampling = {id(s) for s in batch.sampling}
    return [
        Work(
            seq.token_ids(seq.num_computed_tokens, seq.num_computed_tokens + n),
            seq.num_computed_tokens,
            list(seq.block_table),
            id(seq) in sampling,
        )
        for seq, n in batch.items
    ]


class ModelRunner:
    def __init__(self, model: PreTrainedModel, cache: PagedKVCache, device: torch.device) -> None:
        self.model, self.cache, self.device = model, cache, device

    def forward(self, work: list[Work]) -> torch.Tensor:
        """Compute every work item's KV into the cache; float32 logits of the sampled ones, in order."""
        offsets, total = [], 0
        for w in work:
            offsets.append(total)
            total += len(w.tokens)
        ids = torch.tensor([t for w in work for t in w.tokens], device=self.device)
        positions = torch.tensor([w.start + i for w in work for i in range(len(w.tokens))], device=self.device)
        slots = torch.empty(total, dtype=torch.long, device=self.device)
        decodes = [i for i, w in enumerate(work) if len(w.tokens) == 1]
        prefills = [i for i, w in enumerate(work) if len(w.tokens) > 1]
        groups = [self._group([work[i] for i in g], [offsets[i] for i in g], slots) for g in (decodes, prefills) if g]
        keep = torch.tensor(
            [offsets[i] + len(w.tokens) - 1 for i, w in enumerate(work) if w.sample],
            dtype=torch.long,
            device=self.device,
        )
        out = self.model(
            input_ids=ids[None],
            position_ids=positions[None],
            use_cache=False,
            logits_to_keep=keep,
            **{STEP: PagedStep(self.cache, slots, groups)},
        )
        return out.logits[0].float()

    def _group(self, work: list[Work], offsets: list[int], slots: torch.Tensor) -> Group:
        """Index tensors for sequences attended together; fills their tokens' entries of `slots`."""
        d, bs = self.device, self.cache.block_size
        q_len = torch.tensor([len(w.tokens) for w in work], device=d)
        start = torch.tensor([w.start for w in work], device=d)
        q = torch.arange(int(q_len.max()), device=d)
        valid = q[None, :] < q_len[:, None]  # [S, Q]
        q_index = torch.where(valid, torch.tensor(offsets, device=d)[:, None] + q, 0)
        q_pos = torch.where(valid, start[:, None] + q, 0)
        width = max(len(w.block_table) for w in work)
        tables = torch.tensor([w.block_table + [0] * (width - len(w.block_table)) for w in work], device=d)
        context = int((start + q_len).max())
        kv_slots = (tables[:, :, None] * bs + torch.arange(bs, device=d)).reshape(len(work), -1)[:, :context]
        slots[q_index[valid]] = kv_slots.gather(1, q_pos)[valid]
        mask = torch.arange(context, device=d)[None, None, None, :] <= q_pos[:, None, :, None]
        return Group(q_index, valid, kv_slots, mask)

    def plain_logits(self, token_ids: list[int]) -> torch.Tensor:
        """The model's plain forward over a whole sequence, no cache: float32 logits of its last token."""
        ids = torch.tensor([token_ids], device=self.device)
        return self.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[0, -1].float()
