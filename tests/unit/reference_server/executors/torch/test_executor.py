"""The torch executor behind the real engine (reference_server/executors/torch/executor.py): the
tokens of continuous batching over the paged cache equal plain decoding, KV blocks come back, a
sampling failure fails one request, a locked simulated clock stretches steps."""

import asyncio
import random

import torch

from reference_server.batch import Batch
from reference_server.sequence import SamplingParams, Sequence
from tests.unit.reference_server.executors.torch.conftest import (
    Recorder,
    drain,
    engine_with,
    make_executor,
    prompt,
    reference,
)

GREEDY = SamplingParams(max_tokens=24, temperature=0, ignore_eos=True)


def test_batched_paged_chunked_preempted_and_prefix_cached_decoding_equals_plain_decoding(tiny):
    """Ten greedy requests in three languages, some sharing a 64-token prefix, arriving in two waves,
    on a pool too small for all of them and a 40-token step budget: every one gets exactly the
    tokens of decoding it alone by the model's plain forward, no cache."""
    executor = Recorder(make_executor(tiny, num_blocks=32))
    shared = prompt("en", 64)
    prompts = [
        (shared + prompt("en", 30, 200), "en"),
        (prompt("de", 90), "de"),
        (prompt("zh", 17), "zh"),
        (shared + prompt("en", 45, 400), "en"),
        (prompt("ja", 120), "ja"),
        (shared + prompt("en", 8, 600), "en"),
        (prompt("fr", 33), "fr"),
        (shared + prompt("en", 70, 800), "en"),
        (prompt("es", 5), "es"),
        (prompt("de", 60, 300), "de"),
    ]

    async def main() -> tuple[list[Sequence], object]:
        engine = engine_with(executor, num_blocks=32, max_num_batched_tokens=40, watermark=0.0)
        first = [engine.submit(p, GREEDY, lang) for p, lang in prompts[:4]]
        while len(executor.batches) < 6:  # the first wave is running (its shared prefix cached) when the second comes
            await asyncio.sleep(0.001)
        second = [engine.submit(p, GREEDY, lang) for p, lang in prompts[4:]]
        await drain(engine, first + second)
        await engine.stop()
        return first + second, engine.scheduler

    seqs, scheduler = asyncio.run(main())
    for seq in seqs:
        assert seq.finish_reason == "length"
        assert seq.output_token_ids == reference(executor.inner, seq), (seq.lang, seq.num_prompt_tokens)
    # ...and the run really had each thing the title names.
    batches = executor.batches
    assert max(len(b) for b in batches) >= 4, "continuous batching"
    assert any(any(n == 1 for _, n, _ in b) and any(n > 1 for _, n, _ in b) for b in batches), "prefill beside decode"
    assert any(n > 1 and before > 0 for b in batches for _, n, before in b), "a prefill chunk after the first"
    assert scheduler.num_preemptions > 0, "preemption by recompute"
    assert scheduler.blocks.prefix_hits >= 64, "a prefix-cache hit"
    # A hit skips compute: a sequence's first step starts past its cached prefix.
    first: dict[int, int] = {}
    for b in batches:
        for seq, _, before in b:
            first.setdefault(seq.seq_id, before)
    assert max(first.values()) >= 64, "the executor computed a hit's prefix again"


def test_a_wiped_pool_changes_the_tokens(tiny):
    """The comparison above can fail: the same requests with the pool zeroed after their prefill
    decode other tokens than the plain forward."""
    executor = make_executor(tiny, num_blocks=64)
    wiped = False

    class Wiper:
        device = None

        async def execute(self, batch: Batch) -> list:
            nonlocal wiped
            tokens = await executor.execute(batch)
            if all(s.output_token_ids for s in batch.sampling) and not wiped:
                executor.cache.pool.zero_()
                wiped = True
            return tokens

    async def main() -> list[Sequence]:
        engine = engine_with(Wiper(), num_blocks=64)
        seqs = [engine.submit(prompt(lang, 40), GREEDY, lang) for lang in ("en", "de", "fr")]
        await drain(engine, seqs)
        await engine.stop()
        return seqs

    seqs = asyncio.run(main())
    assert wiped
    assert any(s.output_token_ids != reference(executor, s) for s in seqs)


def test_kv_blocks_come_back_after_a_storm_of_cancellations_and_the_pool_serves_on(tiny):
    """Forty requests on a small pool (preemptions), half of them cancelled at random moments, some
    while their step runs in the executor's thread: every block is free with no reference left, the
    pool is the block manager's size and did not grow, and requests after the storm, which reuse
    every block, still decode exactly as the plain forward does."""
    num_blocks = 40
    executor = make_executor(tiny, num_blocks=num_blocks)
    pool_bytes = executor.cache.nbytes
    rng = random.Random(7)

    async def main() -> tuple[object, list[Sequence], list[Sequence]]:
        engine = engine_with(executor, num_blocks=num_blocks, max_num_batched_tokens=64, watermark=0.0)
        langs = ["en", "de", "zh", "ja"]
        doomed_ids = set(rng.sample(range(40), 20))  # long replies: still running when cancelled, on any machine
        storm = [
            engine.submit(
                prompt(langs[i % 4], rng.randint(4, 120), rng.randint(0, 500)),
                SamplingParams(
                    max_tokens=300 if i in doomed_ids else rng.randint(1, 40),
                    ignore_eos=i in doomed_ids,
                    temperature=1.0,
                    seed=i,
                ),
                langs[i % 4],
            )
            for i in range(40)
        ]
        doomed = [storm[i] for i in sorted(doomed_ids)]
        for _ in range(30000):  # the cancellations start once the pool has run short
            if engine.scheduler.num_preemptions:
                break
            await asyncio.sleep(0.001)
        for seq in doomed:
            for _ in range(rng.randint(0, 5)):
                await asyncio.sleep(0.001)
            engine.abort(seq)
        await drain(engine, storm)
        after = [engine.submit(prompt("en", 100, 50 * i), GREEDY, "en") for i in range(6)]
        await drain(engine, after)
        s = engine.scheduler
        assert not s.running
        assert not len(s.waiting)
        await engine.stop()
        return s, storm, after

    scheduler, storm, after = asyncio.run(main())
    blocks = scheduler.blocks
    assert sum(s.finish_reason == "abort" for s in storm) >= 10
    assert scheduler.num_preemptions > 0
    assert blocks.num_free_blocks == num_blocks == executor.cache.num_blocks
    assert blocks.ref_count == [0] * num_blocks
    assert all(not s.block_table for s in storm + after)
    assert executor.cache.nbytes == pool_bytes
    for seq in after:
        assert seq.output_token_ids == reference(executor, seq)


def test_a_sampling_failure_fails_only_its_request(tiny):
    executor = make_executor(tiny, num_blocks=64)
    executor.sampler.vocabularies["xx"] = torch.ones(3, dtype=torch.bool)  # the wrong size: sampling it raises

    async def main() -> list[Sequence]:
        engine = engine_with(executor, num_blocks=64)
        seqs = [engine.submit(prompt("en", 20), GREEDY, lang) for lang in ("en", "xx", "de")]
        await drain(engine, seqs)
        await engine.stop()
        return seqs

    ok, broken, other = asyncio.run(main())
    assert (ok.finish_reason, broken.finish_reason, other.finish_reason) == ("length", "error", "length")
    assert len(ok.output_token_ids) == 24
    assert broken.output_token_ids == []
