"""The torch executor: every scheduler step is a forward pass of a real transformer.

The step runs in the executor's own thread (torch releases the GIL), so HTTP handling and
streaming go on meanwhile. On CUDA the GPU's own clock sets its speed (a `gpu_clock` fault on
`{gpu: N}` locks it through NVML); on the CPU a simulated clock, the sim executor's, stretches
each step by its slowdown, so the admin clock API and `gpu_clock` on `{sim: URL}` act as on sim.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import psutil
import torch

from llmchaos import tokenizer
from llmchaos.errors import UsageError
from reference_server.batch import Batch
from reference_server.executors import ExecutorOptions, Sampled
from reference_server.executors.sim import SimDevice
from reference_server.executors.torch import attention
from reference_server.executors.torch.kv_cache import PagedKVCache
from reference_server.executors.torch.model import LoadedModel, load
from reference_server.executors.torch.model_runner import ModelRunner, Work, snapshot
from reference_server.executors.torch.sampler import GREEDY_BELOW, Draw, Sampler, language_vocabularies
from reference_server.profile import H100_CLOCKS
from reference_server.sequence import Sequence

RANDOM_EOS_PROBABILITY = 1 / 64  # a random model's replies end after 64 tokens on average (at temperature 1)
MEMORY_SHARE = 0.9  # the KV pool may take this much of the memory free when it is made
TYPICAL_STEPS = 9  # a step size's typical time at full clock: the median of its last so many
BACK_TO_BACK_S = 0.005  # a step that starts this soon after the last one returned continues from it


class TorchExecutor:
    def __init__(
        self,
        loaded: LoadedModel,
        cache: PagedKVCache,
        torch_device: torch.device,
        seed: int = 0,
        clocks: tuple[float, float] = H100_CLOCKS,
    ) -> None:
        self.loaded, self.cache, self.torch_device = loaded, cache, torch_device
        self.runner = ModelRunner(loaded.model, cache, torch_device)
        vocab = tokenizer.load().get_vocab_size()
        vocabularies = language_vocabularies(vocab, torch_device) if loaded.random else {}
        eos = RANDOM_EOS_PROBABILITY if loaded.random else None
        self.sampler = Sampler(vocab, tokenizer.eos_id(), vocabularies, torch_device, eos)
        self.rng = random.Random(seed)
        self.model_card = {"engine": "torch", "device": str(torch_device), **loaded.card}
        # The admin clock API's device: simulated on the CPU; a GPU's real clock is NVML's.
        self.device = SimDevice(*clocks) if torch_device.type == "cpu" else None
        cuda = torch_device.type == "cuda"  # NVML finds the GPU by its UUID (indices may differ)
        self.gpu_uuid = f"GPU-{torch.cuda.get_device_properties(torch_device).uuid}" if cuda else None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="torch-step")
        self._deadline = self._returned = float("-inf")  # when the last step was due to end, and returned
        self._full_clock: dict[tuple[int, int], deque[float]] = {}  # a step size's last times at full clock

    def rows(self, batch: Batch) -> list[Draw]:
        return [self._row(seq) for seq in batch.sampling]

    def _row(self, seq: Sequence) -> Draw:
        p, n = seq.params, len(seq.output_token_ids)
        draw = 0.0 if p.temperature < GREEDY_BELOW else (seq.rng or self.rng).random()
        return Draw(p, seq.lang, not p.ignore_eos and n >= max(1, p.min_tokens), draw)

    def step(self, work: list[Work], rows: list[Draw]) -> list[Sampled]:
        """The forward pass and the sampling (in the step thread)."""
        with torch.inference_mode():
            logits = self.runner.forward(work)
            if not rows:
                return []
            try:
                return list(self.sampler.sample(logits, rows))
            except Exception:  # noqa: BLE001 - find the rows that fail, each alone: they fail only their request
                return [self._sample_one(logits[i : i + 1], row) for i, row in enumerate(rows)]

    def _sample_one(self, logits: torch.Tensor, row: Draw) -> Sampled:
        try:
            return self.sampler.sample(logits, [row])[0]
        except Exception as e:  # noqa: BLE001 - the engine fails this request alone and logs why
            return e

    async def execute(self, batch: Batch) -> list[Sampled]:
        start = time.monotonic()
        work, rows = snapshot(batch), self.rows(batch)
        tokens = await asyncio.get_running_loop().run_in_executor(self._thread, self.step, work, rows)
        if self.device is not None:  # a locked simulated clock stretches the step in proportion
            self._deadline = await self.device.run_until(self._stretched(start, _size(batch)))
            self._returned = time.monotonic()
        return tokens

    def _stretched(self, start: float, size: tuple[int, int]) -> float:
        """When a step that began at `start` and has just ended is due at the device's clock: its size's
        typical time at full clock times the slowdown. Typical, not its own: a CPU that sleeps between
        steps runs them slower (cold caches: 1.5 ms of CPU time became 2.4 ms), and that is no clock's doing;
        a median, since a step that a busy machine held off the CPU for 0.3 s is not what that size takes.
        Back to back (as on sim) a step counts from the last one's return, so the engine's own work between
        steps stretches too, and from the last one's deadline, so a sleep's overshoot is not stretched."""
        device, now = self.device, time.monotonic()
        assert device is not None
        back_to_back = 0.0 <= start - self._returned < BACK_TO_BACK_S
        took = now - (self._returned if back_to_back else start)
        if device.locked_mhz is None:
            self._full_clock.setdefault(size, deque(maxlen=TYPICAL_STEPS)).append(took)
            return now
        typical = statistics.median(self._full_clock[size]) if size in self._full_clock else took
        return (self._deadline if back_to_back else start) + typical * device.slowdown


def _size(batch: Batch) -> tuple[int, int]:
    """A step's size class: powers of two of its computed and its context tokens."""
    computed = sum(n for _, n in batch.items)
    return computed.bit_length(), batch.num_context_tokens.bit_length()


def pick_device(name: str) -> torch.device:
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UsageError(f"no CUDA device here (torch {torch.__version__})", field="--device")
    return torch.device("cuda", torch.cuda.current_device())


def _free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return psutil.virtual_memory().available


def create(options: ExecutorOptions) -> TorchExecutor:
    """The executor factory's entry for `--engine torch`."""
    device = pick_device(options.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if device.type == "cpu":
        # One intra-op thread: on a busy 2-core machine OpenMP's workers made a tiny model's matmul
        # 100x slower (1.2 ms against 11 us measured); its ops are too small to share out anyway.
        torch.set_num_threads(1)
    loaded = load(options.model, device, dtype, options.seed, attention.NAME)
    if loaded.tokenizer_path is not None:  # a local model speaks its own tokenizer's tokens
        tokenizer.use(loaded.tokenizer_path)
    c = loaded.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv_heads = c.num_key_value_heads or c.num_attention_heads
    shape = (c.num_hidden_layers, options.num_blocks, options.block_size, kv_heads, head_dim)
    need, free = PagedKVCache.bytes_needed(*shape, dtype), _free_bytes(device)
    if need > MEMORY_SHARE * free:
        raise UsageError(
            f"the KV pool needs {need / 2**30:.1f} GiB, {device} has {free / 2**30:.1f} GiB free", field="--num-blocks"
        )
    return TorchExecutor(loaded, PagedKVCache(*shape, dtype, device), device, options.seed, options.clocks)
