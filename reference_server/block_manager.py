"""Paged KV-cache block manager with prefix caching (chained block hashes), as in vLLM.

A block's hash covers its tokens and the hash of the block before it, so equal
hashes mean equal prefixes. A block is registered in the cache only once all its
tokens are computed. Freed blocks keep their hash and stay reusable until the
free queue (least recently freed first) hands them out again.
"""

from __future__ import annotations

from collections import OrderedDict

from reference_server.sequence import Sequence


class BlockManager:
    def __init__(
        self, num_blocks: int, block_size: int, watermark: float = 0.01, enable_prefix_caching: bool = True
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.watermark_blocks = int(watermark * num_blocks)
        self.enable_prefix_caching = enable_prefix_caching
        self.ref_count = [0] * num_blocks
        self.block_hash: list[int | None] = [None] * num_blocks
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.cached: dict[int, int] = {}  # block hash -> block id
        self.prefix_queries = 0  # prompt tokens looked up
        self.prefix_hits = 0  # prompt tokens found cached
        self.resets = 0  # reset_prefix_cache calls

    @property
    def num_free_blocks(self) -> int:
        return len(self.free)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by live sequences (vLLM's kv_cache_usage_perc)."""
        return 1.0 - len(self.free) / self.num_blocks

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def _chain(self, seq: Sequence, num_full: int, hashes: list[int]) -> list[int]:
        """Extend `hashes` (a prefix of the chain) to cover `num_full` full blocks of `seq`."""
        bs = self.block_size
        for i in range(len(hashes), num_full):
            hashes.append(hash((hashes[-1] if hashes else 0, *seq.token_ids(i * bs, (i + 1) * bs))))
        return hashes

    def _lookup(self, seq: Sequence) -> tuple[list[int], list[int]]:
        """Cached blocks of the longest computed prefix, and their hashes; at least one token is left
        to compute."""
        if not self.enable_prefix_caching:
            return [], []
        full = (seq.num_tokens - 1) // self.block_size
        hits: list[int] = []
        hashes: list[int] = []
        for h in self._chain(seq, full, []):
            block = self.cached.get(h)
            if block is None:
                break
            hits.append(block)
            hashes.append(h)  # == self.block_hash[block]: a block is cached under its own hash
        return hits, hashes

    def allocate(self, seq: Sequence) -> bool:
        """Give a waiting sequence blocks for all its tokens; False if that would cross the watermark."""
        hits, hashes = self._lookup(seq)
        need = self.blocks_needed(seq.num_tokens)
        from_free = need - len(hits) + sum(1 for b in hits if self.ref_count[b] == 0)
        if len(self.free) - from_free < self.watermark_blocks:
            return False
        for b in hits:
            if self.ref_count[b] == 0:
                del self.free[b]
            self.ref_count[b] += 1
        seq.block_table = hits + [self._take() for _ in range(need - len(hits))]
        cached_tokens = len(hits) * self.block_size
        seq.num_cached_tokens = cached_tokens
        seq.num_computed_tokens = max(cached_tokens, seq.num_external_tokens)  # received KV fills its blocks
        seq.block_hashes = hashes
        self.prefix_queries += seq.num_prompt_tokens
        self.prefix_hits += min(cached_tokens, seq.num_prompt_tokens)
        return True

    def append_slots(self, seq: Sequence) -> bool:
        """Make the block table cover every token of `seq`; False when the pool is empty."""
        need = self.blocks_needed(seq.num_tokens) - len(seq.block_table)
        if need > len(self.free):
            return False
        seq.block_table.extend(self._take() for _ in range(need))
        return True

    def cache_full_blocks(self, seq: Sequence) -> None:
        """Register blocks whose tokens are all computed, so later prompts can reuse them."""
        if not self.enable_prefix_caching:
            return
        full = seq.num_computed_tokens // self.block_size
        if full <= len(seq.block_hashes):
            return
        start = len(seq.block_hashes)
        self._chain(seq, full, seq.block_hashes)
        for i in range(start, full):
            h, block = seq.block_hashes[i], seq.block_table[i]
            if h not in self.cached:
                self.cached[h] = block
                self.block_hash[block] = h

    def reset_prefix_cache(self) -> int:
        """Forget every cached block (POST /reset_prefix_cache), as a restart loses them: no later
        prompt finds any; running sequences keep their blocks' KV, and blocks they fill from now on
        are cached again. Unlike vLLM, which refuses while any block is in use, it resets under load
        too (a cold cache is the fault). The blocks it forgot."""
        dropped = len(self.cached)
        self.cached.clear()
        self.block_hash = [None] * self.num_blocks
        self.resets += 1
        return dropped

    def free_seq(self, seq: Sequence) -> None:
        """Release a sequence's blocks; the tail goes first in the eviction order."""
        for b in reversed(seq.block_table):
            self.ref_count[b] -= 1
            if self.ref_count[b] == 0:
                self.free[b] = None
        seq.block_table = []
        seq.block_hashes = []

    def _take(self) -> int:
        block, _ = self.free.popitem(last=False)
        h = self.block_hash[block]
        if h is not None:
            if self.cached.get(h) == block:
                del self.cached[h]
            self.block_hash[block] = None
        self.ref_count[block] = 1
        return block
