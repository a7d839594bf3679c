"""`llmchaos serve --engine torch`: a local model directory (safetensors and its own tokenizer.json),
served as it is: its tokenizer counts and spells, no random-model note; an engine it cannot build is
one line and exit 2."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
import torch

from reference_server.executors.torch import attention
from reference_server.executors.torch.model import load
from tests.procs import serve
from tests.unit.llmchaos.test_tokenizer import lowercasing_copy


def test_a_model_directory_is_served_with_its_own_tokenizer(tmp_path):
    load("tiny", torch.device("cpu"), torch.float32, 3, attention.NAME).model.save_pretrained(tmp_path)
    lowercasing_copy(tmp_path / "tokenizer.json")
    with (
        serve("--engine", "torch", "--device", "cpu", "--model", str(tmp_path)) as s,
        httpx.Client(base_url=s.url, timeout=60) as c,
    ):
        (card,) = c.get("/v1/models").json()["data"]
        assert card["weights"] == str(tmp_path)
        assert "note" not in card  # real weights: no "not meaningful text"

        def prompt_tokens(text: str) -> int:
            body = {"model": card["id"], "prompt": text, "max_tokens": 5, "temperature": 0, "ignore_eos": True}
            r = c.post("/v1/completions", json=body)
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["completion_tokens"] == 5
            return r.json()["usage"]["prompt_tokens"]

        assert prompt_tokens("HELLO WORLD, HOW ARE YOU") == prompt_tokens("hello world, how are you")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--device", "cuda"],
            "llmchaos: error: --device: no CUDA device here (torch ",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device"),
        ),
        (["--model", "/nonexistent"], "llmchaos: error: --model: not tiny, small or a model directory: /nonexistent"),
        (
            ["--num-blocks", "10000000"],
            "llmchaos: error: --num-blocks: the KV pool needs ",
        ),  # 160 GiB, the most allowed
    ],
)
def test_a_torch_engine_it_cannot_build_is_one_line_and_exit_2(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "serve", "--engine", "torch", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(message), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
