"""One tiny model (seeded random weights, float32 on the CPU) for the torch executor's tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import torch

from llmchaos import tokenizer
from reference_server.batch import Batch
from reference_server.config import EngineConfig
from reference_server.engine import Engine
from reference_server.executors.torch import attention
from reference_server.executors.torch.executor import TorchExecutor
from reference_server.executors.torch.kv_cache import PagedKVCache
from reference_server.executors.torch.model import LoadedModel, load
from reference_server.executors.torch.sampler import Draw
from reference_server.sequence import Sequence

CPU = torch.device("cpu")
torch.set_num_threads(1)  # as the executor's factory does on the CPU


@pytest.fixture(scope="session")
def tiny() -> LoadedModel:
    return load("tiny", CPU, torch.float32, 0, attention.NAME)


def make_executor(model: LoadedModel, num_blocks: int, block_size: int = 16) -> TorchExecutor:
    c = model.config
    cache = PagedKVCache(
        c.num_hidden_layers, num_blocks, block_size, c.num_key_value_heads, c.head_dim, torch.float32, CPU
    )
    return TorchExecutor(model, cache, CPU)


@pytest.fixture
def executor(tiny: LoadedModel) -> Callable[..., TorchExecutor]:
    return lambda num_blocks=64, block_size=16: make_executor(tiny, num_blocks, block_size)


def reference(executor: TorchExecutor, seq: Sequence) -> list[int]:
    """Greedy decoding of `seq` alone with no cache: the plain forward over the whole sequence each
    step, as many tokens as `seq` produced (each step continues from the token `seq` really got)."""
    ids, out = list(seq.prompt_token_ids), []
    with torch.inference_mode():
        for n, got in enumerate(seq.output_token_ids):
            logits = executor.runner.plain_logits(ids)
            row = Draw(seq.params, seq.lang, not seq.params.ignore_eos and n >= max(1, seq.params.min_tokens), 0.0)
            out.append(executor.sampler.sample(logits[None], [row])[0])
            ids.append(got)
    return out


class Recorder:
    """The executor, with every batch it ran written down: (sequence, tokens, computed before)."""

    def __init__(self, inner: TorchExecutor) -> None:
        self.inner = inner
        self.device = inner.device
        self.batches: list[list[tuple[Sequence, int, int]]] = []

    async def execute(self, batch: Batch) -> list:
        self.batches.append([(seq, n, seq.num_computed_tokens) for seq, n in batch.items])
        return await self.inner.execute(batch)


async def drain(engine: Engine, seqs: list[Sequence]) -> None:
    async def one(seq: Sequence) -> None:
        async for _ in engine.deltas(seq):
            pass

    await asyncio.gather(*(one(s) for s in seqs))


def prompt(lang: str, n: int, skip: int = 0) -> list[int]:
    """`n` tokens of the language's corpus, from token `skip` on."""
    from llmchaos import languages

    ids = tokenizer.encode(" ".join(languages.get(lang).paragraphs()))
    return ids[skip : skip + n]


def engine_with(executor: object, **cfg: object) -> Engine:
    engine = Engine(EngineConfig(**cfg), executor)  # type: ignore[arg-type]
    engine.start()
    engine.state = "ready"
    return engine
