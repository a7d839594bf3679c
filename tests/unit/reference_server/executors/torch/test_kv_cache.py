"""The block pool (reference_server/executors/torch/kv_cache.py)."""

import torch

from reference_server.executors.torch.kv_cache import PagedKVCache


def test_a_layers_keys_and_values_come_back_from_their_slots_and_touch_nothing_else():
    cache = PagedKVCache(3, 8, 4, 2, 5, torch.float32, torch.device("cpu"))
    slots = torch.tensor([13, 2, 31])
    k, v = torch.randn(3, 2, 5), torch.randn(3, 2, 5)
    cache.write(1, slots, k, v)
    got_k, got_v = cache.read(1, slots[None])
    assert torch.equal(got_k[0], k)
    assert torch.equal(got_v[0], v)
    cache.pool[1][:, slots] = 0
    assert not cache.pool.any()


def test_its_size_is_the_block_managers_blocks_times_what_a_token_takes():
    args = (2, 100, 16, 4, 32)
    cache = PagedKVCache(*args, torch.bfloat16, torch.device("cpu"))
    assert cache.nbytes == PagedKVCache.bytes_needed(*args, torch.bfloat16) == 2 * 2 * 100 * 16 * 4 * 32 * 2
    assert cache.pool.shape[2] == 100 * 16
