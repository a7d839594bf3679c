"""The paged cache behind transformers' attention interface (`AttentionInterface.register`).

The model runs one step as a single row of every scheduled token (batch 1, per-token positions);
each attention layer then stores the row's keys and values in the block pool and lets every
sequence attend to its own context read back through its block table, sequences of the same
query length padded together. transformers has the interface but no block pool that an outside
block manager's tables index (its own paged cache allocates its blocks itself), hence this file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from reference_server.executors.torch.kv_cache import PagedKVCache

NAME = "llmchaos_paged"
STEP = "llmchaos_step"  # the keyword the model's forward carries down to each attention layer


@dataclass
class Group:
    """Sequences attended together, their queries padded to the longest (padding attends to slot 0)."""

    q_index: torch.Tensor  # [S, Q] each query's index in the step's row
    q_valid: torch.Tensor  # [S, Q] False for padding
    kv_slots: torch.Tensor  # [S, K] pool slots of each sequence's context, positions 0..K-1
    mask: torch.Tensor  # [S, 1, Q, K] key position <= query position


@dataclass
class PagedStep:
    cache: PagedKVCache
    slots: torch.Tensor  # [T] where each of the row's tokens is stored
    groups: list[Group]


def paged_attention(
    module: nn.Module,
    query: torch.Tensor,  # [1, heads, T, dim], rotary applied
    key: torch.Tensor,  # [1, kv_heads, T, dim]
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: object,
) -> tuple[torch.Tensor, None]:
    """Attention through the paged cache; without a step, the plain causal forward (the reference)."""
    step = kwargs.pop(STEP, None)
    if not isinstance(step, PagedStep):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **cast(Any, kwargs))
    layer: int = module.layer_idx  # type: ignore[assignment]  # every transformers attention layer has it
    step.cache.write(layer, step.slots, key[0].transpose(0, 1), value[0].transpose(0, 1))
    q = query[0].transpose(0, 1)  # [T, heads, dim]
    out = torch.empty_like(q)
    for g in step.groups:
        k, v = step.cache.read(layer, g.kv_slots)  # [S, K, kv_heads, dim]
        o = nn.functional.scaled_dot_product_attention(
            q[g.q_index].transpose(1, 2),  # [S, heads, Q, dim]
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=g.mask,
            scale=scaling,
            enable_gqa=True,
        )
        out[g.q_index[g.q_valid]] = o.transpose(1, 2)[g.q_valid]
    return out.unsqueeze(0), None


AttentionInterface.register(NAME, paged_attention)
