"""The paged KV cache in device memory: one block pool that the block manager's tables index.

Slot `b * block_size + i` holds token `i` of block `b`, for every layer, keys and values; a
sequence's token at position p lives in slot `block_table[p // block_size] * block_size + p %
block_size`. The pool has as many blocks as the block manager, so its block ids need no mapping.
"""

from __future__ import annotations

import torch


class PagedKVCache:
    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.num_blocks, self.block_size = num_blocks, block_size
        # [layer, key|value, slot, head, dim]: a layer's keys are one contiguous [slots, heads, dim] tensor
        shape = (num_layers, 2, num_blocks * block_size, num_kv_heads, head_dim)
        self.pool = torch.zeros(shape, dtype=dtype, device=device)

    @staticmethod
    def bytes_needed(
        num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype
    ) -> int:
        return num_layers * 2 * num_blocks * block_size * num_kv_heads * head_dim * dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.pool.nbytes

    def write(self, layer: int, slots: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        """Store one layer's keys and values ([tokens, heads, dim]) at `slots` ([tokens])."""
        self.pool[layer, 0].index_copy_(0, slots, key)
        self.pool[layer, 1].index_copy_(0, slots, value)

    def read(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One layer's keys and values at `slots` (any shape): [*slots.shape, heads, dim] each."""
        return self.pool[layer, 0][slots], self.pool[layer, 1][slots]
