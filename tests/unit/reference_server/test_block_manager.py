from reference_server.block_manager import BlockManager
from reference_server.sequence import SamplingParams, Sequence


def seq(tokens: list[int]) -> Sequence:
    return Sequence(list(tokens), SamplingParams(max_tokens=8))


def test_allocate_covers_every_token_and_free_returns_blocks():
    bm = BlockManager(num_blocks=10, block_size=4, watermark=0.0)
    s = seq(range(9))
    assert bm.allocate(s)
    assert len(s.block_table) == 3
    assert bm.num_free_blocks == 7
    bm.free_seq(s)
    assert bm.num_free_blocks == 10
    assert bm.usage == 0.0


def test_watermark_refuses_admission_that_would_cross_it():
    bm = BlockManager(num_blocks=10, block_size=4, watermark=0.2)  # keep 2 blocks free
    assert bm.allocate(seq(range(32)))  # 8 blocks, leaves 2
    assert not bm.allocate(seq(range(1)))  # one more would leave 1 < 2


def test_prefix_hit_reuses_only_computed_full_blocks():
    bm = BlockManager(num_blocks=16, block_size=4, watermark=0.0)
    a = seq(range(10))
    bm.allocate(a)
    b = seq(range(10))
    bm.allocate(b)
    assert b.num_cached_tokens == 0  # a's blocks are not computed yet
    a.num_computed_tokens = 10
    bm.cache_full_blocks(a)
    c = seq([*range(8), 99, 98, 97])
    bm.allocate(c)
    assert c.num_cached_tokens == 8
    assert c.block_table[:2] == a.block_table[:2]
    assert bm.prefix_hits == 8


def test_cached_blocks_survive_free_until_reused():
    bm = BlockManager(num_blocks=4, block_size=4, watermark=0.0)
    a = seq(range(9))
    bm.allocate(a)
    a.num_computed_tokens = 9
    bm.cache_full_blocks(a)
    bm.free_seq(a)
    b = seq(range(9))
    assert bm.allocate(b)
    assert b.num_cached_tokens == 8
    bm.free_seq(b)
    filler = seq(range(100, 116))  # needs all 4 blocks: evicts the cached ones
    assert bm.allocate(filler)
    assert bm.cached == {} or all(bm.block_hash[blk] == h for h, blk in bm.cached.items())
    bm.free_seq(filler)
    c = seq(range(9))
    bm.allocate(c)
    assert c.num_cached_tokens == 0


def test_hit_leaves_one_token_to_compute():
    bm = BlockManager(num_blocks=8, block_size=4, watermark=0.0)
    a = seq(range(8))
    bm.allocate(a)
    a.num_computed_tokens = 8
    bm.cache_full_blocks(a)
    b = seq(range(8))
    bm.allocate(b)
    assert b.num_cached_tokens == 4
    assert b.num_uncomputed_tokens == 4


def test_append_slots_grows_by_block_and_fails_when_empty():
    bm = BlockManager(num_blocks=2, block_size=4, watermark=0.0)
    s = seq(range(4))
    bm.allocate(s)
    s.output_token_ids.append(1)
    assert bm.append_slots(s)
    assert len(s.block_table) == 2
    s.output_token_ids.extend([1, 1, 1, 1])
    assert not bm.append_slots(s)


def test_received_kv_counts_as_computed_but_not_as_a_cache_hit():
    bm = BlockManager(num_blocks=16, block_size=4, watermark=0.0)
    s = seq(range(10))
    s.num_external_tokens = 9  # a prefill engine sent all but the last prompt token's KV
    assert bm.allocate(s)
    assert (s.num_computed_tokens, s.num_cached_tokens, s.num_uncomputed_tokens) == (9, 0, 1)
    assert bm.prefix_hits == 0


def test_a_reset_forgets_every_cached_block_running_ones_too_and_caching_starts_again():
    bm = BlockManager(num_blocks=16, block_size=4, watermark=0.0)
    done, running = seq(range(9)), seq(range(50, 59))
    for s in (done, running):
        bm.allocate(s)
        s.num_computed_tokens = 9
        bm.cache_full_blocks(s)
    bm.free_seq(done)
    assert len(bm.cached) == 4
    assert bm.reset_prefix_cache() == 4
    assert (bm.resets, bm.cached) == (1, {})
    assert all(h is None for h in bm.block_hash)
    cold = seq(range(9))
    assert bm.allocate(cold)
    assert cold.num_cached_tokens == 0  # the freed blocks' hashes are gone
    hot = seq(range(50, 59))
    assert bm.allocate(hot)
    assert hot.num_cached_tokens == 0  # and so are the running sequence's
    assert bm.num_free_blocks == 16 - 3 - 3 - 3  # its blocks stay its own
    cold.num_computed_tokens = 9
    bm.cache_full_blocks(cold)
    again = seq(range(9))
    bm.allocate(again)
    assert again.num_cached_tokens == 8  # blocks computed after the reset are cached again
    bm.free_seq(running)
    bm.free_seq(hot)
    assert bm.reset_prefix_cache() == 2
    assert bm.resets == 2
