"""Continuous batching in vLLM's model: running first, then admit waiting under a token budget.

Every step each running sequence gets its uncomputed tokens (a prefill chunk, or
one decode token) within `max_num_batched_tokens`; waiting sequences are then
admitted in policy order while blocks and `max_num_seqs` allow. When a running
sequence needs a block and none is free, the most recently admitted sequence is
preempted by recompute: its blocks are freed and it waits again at the front.
"""

from __future__ import annotations

from reference_server.batch import Batch
from reference_server.block_manager import BlockManager
from reference_server.config import EngineConfig
from reference_server.policies import Policy, make_policy
from reference_server.sequence import Sequence, Status


class Scheduler:
    def __init__(self, cfg: EngineConfig, policy: Policy | None = None) -> None:
        self.cfg = cfg
        self.waiting: Policy = policy or make_policy(cfg)
        self.running: list[Sequence] = []
        self.blocks = BlockManager(cfg.num_blocks, cfg.block_size, cfg.watermark, cfg.enable_prefix_caching)
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.add(seq)

    def has_work(self) -> bool:
        return bool(self.running) or len(self.waiting) > 0

    def schedule(self) -> Batch:
        budget = self.cfg.max_num_batched_tokens
        batch = Batch()
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            while not self.blocks.append_slots(seq):
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            else:
                n = min(seq.num_uncomputed_tokens, budget)
                batch.add(seq, n)
                budget -= n
                i += 1
                continue
            break
        while not preempted and budget > 0 and len(self.running) < self.cfg.max_num_seqs:
            head = self.waiting.peek()
            if head is None or not self.blocks.allocate(head):
                break
            self.waiting.pop()
            head.status = Status.RUNNING
            self.running.append(head)
            n = min(head.num_uncomputed_tokens, budget)
            batch.add(head, n)
            budget -= n
        return batch

    def commit(self, batch: Batch) -> None:
        """Mark the batch's tokens computed (after the executor ran it)."""
        for seq, n in batch.items:
            if seq.status is Status.RUNNING:
                seq.num_computed_tokens += n
                self.blocks.cache_full_blocks(seq)

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a sequence (done, stopped or aborted) and free its blocks at once."""
        if seq.status is Status.FINISHED:
            return
        if seq.status is Status.RUNNING:
            self.running.remove(seq)
        else:
            self.waiting.remove(seq)
        seq.status = Status.FINISHED
        seq.finish_reason = reason
        self.blocks.free_seq(seq)

    def _preempt(self, seq: Sequence) -> None:
        self.blocks.free_seq(seq)
        seq.num_computed_tokens = seq.num_external_tokens = 0  # received KV freed too: recomputed
        seq.status = Status.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.push_front(seq)
