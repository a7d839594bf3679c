"""The model the torch executor runs (reference_server/executors/torch/model.py)."""

import shutil

import pytest
import torch

from llmchaos import tokenizer
from llmchaos.errors import UsageError
from reference_server.executors.torch import attention
from reference_server.executors.torch.model import SHAPES, load, random_config

CPU = torch.device("cpu")


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_configs_are_todays_decoder_shape_over_the_shipped_vocabulary(shape):
    c = random_config(shape)
    assert c.model_type == "llama"  # RMSNorm, rotary positions
    assert c.num_key_value_heads < c.num_attention_heads  # grouped-query attention
    assert c.hidden_act == "silu"  # SwiGLU: silu(gate) * up
    assert c.vocab_size == tokenizer.load().get_vocab_size()
    assert c.eos_token_id == tokenizer.eos_id()


def test_random_weights_are_seeded(tiny):
    again = load("tiny", CPU, torch.float32, 0, attention.NAME).model.state_dict()
    other = load("tiny", CPU, torch.float32, 1, attention.NAME).model.state_dict()
    mine = tiny.model.state_dict()
    assert all(torch.equal(mine[k], again[k]) for k in mine)
    assert not torch.equal(
        mine["model.layers.0.self_attn.q_proj.weight"], other["model.layers.0.self_attn.q_proj.weight"]
    )
    assert tiny.random
    assert "not meaningful text" in tiny.card["note"]


def test_a_model_directory_loads_with_its_weights_and_tokenizer(tiny, tmp_path):
    tiny.model.save_pretrained(tmp_path)  # safetensors
    shutil.copy(tokenizer.PATH, tmp_path / "tokenizer.json")
    loaded = load(str(tmp_path), CPU, torch.float32, 5, attention.NAME)
    assert not loaded.random
    assert loaded.tokenizer_path == tmp_path / "tokenizer.json"
    assert loaded.model.config._attn_implementation == attention.NAME
    ids = torch.tensor([tokenizer.encode("Guten Morgen, wie geht es dir?")])
    with torch.inference_mode():
        torch.testing.assert_close(loaded.model(input_ids=ids).logits, tiny.model(input_ids=ids).logits)


def test_what_is_not_a_model_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="--model: not tiny, small or a model directory"):
        load(str(tmp_path / "nothing"), CPU, torch.float32, 0, attention.NAME)
    with pytest.raises(UsageError, match=r"has no tokenizer\.json"):
        load(str(tmp_path), CPU, torch.float32, 0, attention.NAME)
    shutil.copy(tokenizer.PATH, tmp_path / "tokenizer.json")
    with pytest.raises(UsageError, match="cannot load a causal LM"):
        load(str(tmp_path), CPU, torch.float32, 0, attention.NAME)
