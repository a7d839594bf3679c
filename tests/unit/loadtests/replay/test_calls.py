"""A replayed request as sent: the recorded body, or a prompt of the recorded size, with the
target's model, streaming, the output length asked for and the language."""

import configargparse
import orjson
import pytest

from llmchaos import tokenizer
from loadtests.adapters import ADAPTERS, Ask
from loadtests.logs.log_record import LogRecord
from loadtests.replay.calls import asking, build
from loadtests.replay.settings import Carried, add_replay_arguments

ASK = Ask("served", "", max_tokens=64)


def body(call):
    return orjson.loads(call.body)


def test_a_recorded_body_keeps_its_fields_and_gets_the_targets_model_and_streaming():
    rec = LogRecord(3, 0.0, "u", body={"model": "prod", "messages": [{"role": "user", "content": "hi"}], "top_p": 0.5})
    call = build(rec, "de", ADAPTERS["openai-chat"], 0, ASK)
    assert call.path == "/v1/chat/completions"
    assert call.headers["x-llmchaos-lang"] == "de"
    b = body(call)
    assert b == {
        "model": "served",
        "messages": [{"role": "user", "content": "hi"}],
        "top_p": 0.5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert call.max_tokens is None  # the recorded body asks for no length: the target decides
    assert rec.body == {"model": "prod", "messages": [{"role": "user", "content": "hi"}], "top_p": 0.5}  # not changed


def test_force_output_length_asks_for_exactly_the_recorded_tokens():
    rec = LogRecord(1, 0.0, "u", body={"prompt": "x", "max_tokens": 500}, output_tokens=42)
    force = Ask("m", "", max_tokens=64, lang_in_body=True, api_key="k", force_output=True)
    call = build(rec, "en", ADAPTERS["openai-completions"], 0, force)
    b = body(call)
    assert (b["max_tokens"], b["min_tokens"], b["ignore_eos"], call.max_tokens) == (42, 42, True, 42)
    assert b["metadata"] == {"lang": "en"}
    assert call.headers["authorization"] == "Bearer k"
    call = build(rec, "en", ADAPTERS["openai-completions"], 0, ASK)
    assert (body(call)["max_tokens"], call.max_tokens, "ignore_eos" in body(call)) == (500, 500, False)


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions", "gemini"])
def test_a_trace_line_becomes_a_prompt_of_its_size_asking_its_output(api):
    rec = LogRecord(7, 0.0, "u", input_tokens=300, output_tokens=25, hash_ids=(1,), block_tokens=512)
    call = build(rec, "ja", ADAPTERS[api], 0, ASK)
    b = body(call)
    text = {
        "openai-chat": lambda: b["messages"][0]["content"],
        "openai-completions": lambda: b["prompt"],
        "gemini": lambda: b["contents"][0]["parts"][0]["text"],
    }[api]()
    assert tokenizer.count(text) == 300
    assert call.max_tokens == 25
    if api == "gemini":
        assert call.path == "/v1beta/models/served:streamGenerateContent?alt=sse"
        assert b["generationConfig"] == {"maxOutputTokens": 25}
    else:
        assert b["max_tokens"] == 25


def test_no_stream_and_a_trace_without_output_length():
    rec = LogRecord(1, 0.0, "u", input_tokens=10, body=None)
    plain = Ask("m", "", max_tokens=33, stream=False, lang_in_body=True)
    call = build(rec, "zh", ADAPTERS["gemini"], 0, plain)
    assert call.path.endswith(":generateContent")
    assert (call.max_tokens, body(call)["labels"]) == (33, {"lang": "zh"})
    recorded = LogRecord(1, 0.0, "u", body={"prompt": "x", "stream_options": {}})
    call = build(recorded, "en", ADAPTERS["openai-completions"], 0, plain)
    assert body(call)["stream"] is False
    assert "stream_options" not in body(call)


def test_the_replays_options_are_what_it_asks():
    parser = configargparse.ArgumentParser()
    parser.add_argument("--host", default="")
    add_replay_arguments(parser)
    o = parser.parse_args(["--log", "x", "--model", "m", "--max-tokens", "9", "--no-stream", "--lang-in-body"])
    assert asking(Carried.of(o)) == Ask("m", "", max_tokens=9, stream=False, lang_in_body=True)
    o = parser.parse_args(["--log", "x", "--api-key", "k", "--force-output-length"])
    assert asking(Carried.of(o)) == Ask("llmchaos-sim-8b", "", max_tokens=128, api_key="k", force_output=True)
