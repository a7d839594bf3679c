"""One step as one forward pass (reference_server/executors/torch/model_runner.py): the paged cache's
logits equal the plain forward's, whatever the mix of prefill chunks and decodes."""

import pytest
import torch

from reference_server.executors.torch import attention
from reference_server.executors.torch.kv_cache import PagedKVCache
from reference_server.executors.torch.model import load
from reference_server.executors.torch.model_runner import ModelRunner, Work
from tests.unit.reference_server.executors.torch.conftest import CPU, make_executor, prompt

TOL = {"atol": 1e-4, "rtol": 1e-4}


def _blocks(i: int) -> list[int]:
    return list(range(20 * i, 20 * i + 20))  # 320 tokens of room each


@pytest.mark.parametrize("chunks", [[7], [1, 1, 1], [5, 12, 1, 30], [64, 64]])
def test_chunked_prefill_then_decode_gives_the_plain_forwards_logits(tiny, chunks):
    """Three sequences computed in chunks of these sizes, side by side in each step; then one
    decode step of all three at once."""
    ex = make_executor(tiny, num_blocks=64)
    seqs = [prompt(lang, sum(chunks) + 1, 10) for lang in ("en", "de", "ja")]
    done = 0
    with torch.inference_mode():
        for n in chunks:
            ex.runner.forward([Work(s[done : done + n], done, _blocks(i), False) for i, s in enumerate(seqs)])
            done += n
        got = ex.runner.forward([Work(s[done : done + 1], done, _blocks(i), True) for i, s in enumerate(seqs)])
        want = torch.stack([ex.runner.plain_logits(s) for s in seqs])
    torch.testing.assert_close(got, want, **TOL)


def test_a_decode_beside_a_prefill_and_only_sampled_rows_come_back(tiny):
    ex = make_executor(tiny, num_blocks=64)
    a, b = prompt("en", 50), prompt("zh", 30)
    with torch.inference_mode():
        ex.runner.forward([Work(a[:49], 0, _blocks(0), False)])
        got = ex.runner.forward([Work(a[49:], 49, _blocks(0), True), Work(b[:20], 0, _blocks(1), False)])
        got2 = ex.runner.forward([Work(b[20:], 20, _blocks(1), True)])
        assert got.shape == (1, ex.loaded.config.vocab_size)
        torch.testing.assert_close(got[0], ex.runner.plain_logits(a), **TOL)
        torch.testing.assert_close(got2[0], ex.runner.plain_logits(b), **TOL)


def test_a_sequence_reads_its_context_through_its_own_block_table(tiny):
    """Blocks in any order (as a free queue hands them out) and a prefix shared with another table."""
    ex = make_executor(tiny, num_blocks=64)
    shared, a_tail, b_tail = prompt("en", 32), prompt("en", 9, 100), prompt("en", 5, 300)
    table_a, table_b = [40, 3, 17], [40, 3, 9]  # blocks 40 and 3: the shared 32-token prefix
    with torch.inference_mode():
        ex.runner.forward([Work(shared + a_tail[:-1], 0, table_a, False)])
        got = ex.runner.forward(
            [Work(a_tail[-1:], 40, table_a, True), Work(b_tail, 32, table_b, True)]  # b computes only its tail
        )
        torch.testing.assert_close(got[0], ex.runner.plain_logits(shared + a_tail), **TOL)
        torch.testing.assert_close(got[1], ex.runner.plain_logits(shared + b_tail), **TOL)


def test_the_pool_is_what_the_logits_come_from(tiny):
    """Zeroing the pool between prefill and decode changes the decode's logits (the test above can fail)."""
    ex = make_executor(tiny, num_blocks=64)
    s = prompt("de", 40)
    with torch.inference_mode():
        ex.runner.forward([Work(s[:-1], 0, _blocks(0), False)])
        ex.cache.pool.zero_()
        got = ex.runner.forward([Work(s[-1:], 39, _blocks(0), True)])
        assert not torch.allclose(got[0], ex.runner.plain_logits(s), **TOL)


def test_bfloat16_as_on_cuda_runs_the_same_paged_path(tiny):
    """The CUDA dtype, on the CPU: a bf16 model over a bf16 pool gives its own plain forward's logits
    (within bf16's precision)."""
    c = tiny.config
    model = load("tiny", CPU, torch.bfloat16, 0, attention.NAME)
    cache = PagedKVCache(c.num_hidden_layers, 64, 16, c.num_key_value_heads, c.head_dim, torch.bfloat16, CPU)
    runner = ModelRunner(model.model, cache, CPU)
    s = prompt("ja", 50)
    with torch.inference_mode():
        runner.forward([Work(s[:30], 0, _blocks(0), False)])
        runner.forward([Work(s[30:49], 30, _blocks(0), False)])
        got = runner.forward([Work(s[49:], 49, _blocks(0), True)])
        want = runner.plain_logits(s)
    assert cache.pool.dtype == torch.bfloat16
    torch.testing.assert_close(got[0], want, atol=0.05, rtol=0.05)
