"""The decoder-only model the torch executor runs: a Llama of today's shape from `transformers`.

`tiny` and `small` are Llama configs (RMSNorm, rotary positions, grouped-query attention, SwiGLU)
over the shipped tokenizer's vocabulary, with seeded random weights made here (nothing can be
downloaded); a directory is loaded as it is, with its safetensors and its own tokenizer.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, PreTrainedModel

from llmchaos import tokenizer
from llmchaos.errors import UsageError

# Shapes: hidden, intermediate, layers, query heads, KV heads. `small` is TinyLlama-1.1B's width
# with 12 of its 22 layers (~0.6 B parameters): a GPU's work, seconds per step on a CPU.
SHAPES: dict[str, tuple[int, int, int, int, int]] = {
    "tiny": (128, 256, 2, 4, 2),
    "small": (2048, 5632, 12, 32, 4),
}
INIT_STD = 0.1  # wider than Llama's 0.02, so that a random model's next token depends on its context


@dataclass
class LoadedModel:
    model: PreTrainedModel
    random: bool  # seeded random weights: the output is tokens, not meaningful text
    card: dict[str, str] = field(default_factory=dict)  # what /v1/models says of it
    tokenizer_path: Path | None = None  # a local model's own tokenizer.json (None: the shipped one)

    @property
    def config(self) -> LlamaConfig:
        return self.model.config  # type: ignore[return-value]  # transformers types it as PretrainedConfig


def random_config(shape: str) -> LlamaConfig:
    hidden, inter, layers, heads, kv_heads = SHAPES[shape]
    return LlamaConfig(
        vocab_size=tokenizer.load().get_vocab_size(),
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=131072,
        initializer_range=INIT_STD,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_id(),
        bos_token_id=tokenizer.load().token_to_id("<s>"),
    )


def load(spec: str, device: torch.device, dtype: torch.dtype, seed: int, attn: str) -> LoadedModel:
    """`tiny`, `small` (seeded random weights) or a local model directory, in eval mode on `device`."""
    if spec in SHAPES:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), device:
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(random_config(spec), dtype=dtype, attn_implementation=attn)
        note = "random weights: the output is tokens of the request's language vocabulary, not meaningful text"
        return LoadedModel(model.eval(), True, {"weights": f"random (seed {seed})", "note": note})
    return _load_dir(Path(spec), device, dtype, attn)


def _load_dir(path: Path, device: torch.device, dtype: torch.dtype, attn: str) -> LoadedModel:
    tokenizer_json = path / "tokenizer.json"
    if not path.is_dir():
        raise UsageError(f"not tiny, small or a model directory: {path}", field="--model")
    if not tokenizer_json.is_file():
        raise UsageError(f"{path} has no tokenizer.json (a fast tokenizer file is needed)", field="--model")
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            path, config=config, dtype=dtype, local_files_only=True, attn_implementation=attn
        )
    except (OSError, ValueError, KeyError) as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]  # one line
        raise UsageError(f"cannot load a causal LM from {path}: {why}", field="--model") from None
    if model.config.vocab_size < tokenizer.load(tokenizer_json).get_vocab_size():
        raise UsageError(f"{path}: the model's vocabulary is smaller than its tokenizer's", field="--model")
    model = model.to(device)  # type: ignore[arg-type]  # transformers' wrapper types Module.to's argument as a model
    return LoadedModel(model.eval(), False, {"weights": str(path)}, tokenizer_json)
