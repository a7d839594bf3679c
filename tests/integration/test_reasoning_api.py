"""The reference server thinking first, as reasoning models stream: OpenAI chat deltas in
`reasoning_content` (or `reasoning`), Gemini parts with `thought: true`, counted in each API's usage;
the official SDKs parse both. Real servers on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from google import genai
from google.genai import types

from llmchaos.sse_codec import Decoder
from tests.integration.conftest import FAST
from tests.procs import Server, serve

MODEL = "llmchaos-sim-8b"
MSGS = [{"role": "user", "content": "Why is the sky blue?"}]
CONTENTS = [{"role": "user", "parts": [{"text": "Why is the sky blue?"}]}]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serve(*FAST) as s:
        yield s


def events(url: str, path: str, body: dict) -> list[dict]:
    """A stream's events as JSON, [DONE] left out."""
    dec, out = Decoder(), []
    with httpx.stream("POST", url + path, json=body, timeout=60) as r:
        assert r.status_code == 200, r.read()
        for chunk in r.iter_raw():
            out.extend(dec.feed(chunk))
    return [json.loads(e.data) for e in out if e.data != "[DONE]"]


def chat(url: str, **extra) -> list[dict]:
    body = {"model": MODEL, "messages": MSGS, "stream": True, "stream_options": {"include_usage": True}}
    return events(url, "/v1/chat/completions", body | extra)


def deltas(chunks: list[dict], field: str) -> list[str]:
    return [c["choices"][0]["delta"][field] for c in chunks if c["choices"] and field in c["choices"][0]["delta"]]


def order(chunks: list[dict], field: str = "reasoning_content") -> str:
    """R for each thinking delta, A for each answer delta with text: the stream's shape."""
    marks = ""
    for c in chunks:
        d = c["choices"][0]["delta"] if c["choices"] else {}
        marks += "R" if d.get(field) else "A" if d.get("content") else ""
    return marks


def test_chat_thinks_the_tokens_asked_then_answers_and_counts_them(server: Server):
    chunks = chat(server.url, thinking_tokens=20, max_tokens=30, ignore_eos=True)
    shape = order(chunks)
    assert shape.startswith("R")
    assert "A" in shape
    assert "R" not in shape[shape.index("A") :], shape  # all the thinking comes before any answer
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == 30
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 20}
    assert "".join(deltas(chunks, "reasoning_content")).strip()
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"


def test_a_model_name_suffix_sets_the_thinking(server: Server):
    chunks = chat(server.url, model=f"{MODEL}-think-12", max_tokens=20, ignore_eos=True)
    assert chunks[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 12}
    assert chunks[0]["model"] == f"{MODEL}-think-12"
    r = httpx.post(server.url + "/v1/chat/completions", json={"model": f"{MODEL}-think-x", "messages": MSGS})
    assert r.status_code == 404


def test_thinking_counts_in_max_tokens_as_vllms_does(server: Server):
    chunks = chat(server.url, thinking_tokens=50, max_tokens=8)
    assert order(chunks) == "R" * len(order(chunks))
    assert chunks[-1]["usage"]["completion_tokens"] == 8
    assert chunks[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 8}


def test_thinking_is_never_cut_short_by_an_end_of_sequence(server: Server):
    """Without ignore_eos a reply may end at any token: never while thinking, and one answer token
    comes after it."""
    for seed in range(8):
        chunks = chat(server.url, thinking_tokens=10, max_tokens=200, seed=seed)
        usage = chunks[-1]["usage"]
        assert usage["completion_tokens_details"] == {"reasoning_tokens": 10}
        assert usage["completion_tokens"] > 10


def test_no_thinking_no_reasoning_fields(server: Server):
    chunks = chat(server.url, max_tokens=6, ignore_eos=True)
    assert "completion_tokens_details" not in chunks[-1]["usage"]
    assert not deltas(chunks, "reasoning_content")


def test_non_stream_chat_and_completions_carry_the_thinking(server: Server):
    r = httpx.post(
        server.url + "/v1/chat/completions",
        json={"model": MODEL, "messages": MSGS, "thinking_tokens": 6, "max_tokens": 10, "ignore_eos": True},
    ).json()
    message = r["choices"][0]["message"]
    assert message["reasoning_content"].strip()
    assert message["content"].strip()
    assert r["usage"]["completion_tokens_details"] == {"reasoning_tokens": 6}
    r = httpx.post(
        server.url + "/v1/completions",
        json={"model": MODEL, "prompt": "Why?", "thinking_tokens": 6, "max_tokens": 10, "ignore_eos": True},
    ).json()
    assert r["usage"] == {
        "prompt_tokens": r["usage"]["prompt_tokens"],
        "completion_tokens": 10,
        "total_tokens": r["usage"]["prompt_tokens"] + 10,
        "completion_tokens_details": {"reasoning_tokens": 6},
    }


def test_the_openai_sdk_parses_the_thinking_stream(server: Server):
    sdk = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    chunks = list(
        sdk.chat.completions.create(
            model=f"{MODEL}-think-15",
            messages=MSGS,
            max_tokens=25,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    thinking = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert thinking.strip()
    assert answer.strip()
    assert chunks[-1].usage.completion_tokens == 25
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 15


def test_the_delta_field_can_be_vllms_newer_reasoning():
    with serve(*FAST, "--reasoning-field", "reasoning") as s:
        chunks = chat(s.url, thinking_tokens=5, max_tokens=9, ignore_eos=True)
    assert deltas(chunks, "reasoning")
    assert not deltas(chunks, "reasoning_content")
    assert order(chunks, "reasoning").startswith("R")


# -- Gemini ---------------------------------------------------------------------------------------
def gemini(url: str, model: str = MODEL, **thinking) -> list[dict]:
    body = {"contents": CONTENTS, "generationConfig": {"maxOutputTokens": 30, "thinkingConfig": thinking}}
    return events(url, f"/v1beta/models/{model}:streamGenerateContent?alt=sse", body)


def test_gemini_streams_thoughts_first_when_asked_and_counts_them_apart(server: Server):
    chunks = gemini(server.url, thinkingBudget=12, includeThoughts=True)
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"] if p["text"]]
    kinds = "".join("T" if p.get("thought") else "A" for p in parts)
    assert kinds.startswith("T"), kinds
    assert "T" not in kinds[kinds.index("A") :], kinds
    usage = chunks[-1]["usageMetadata"]
    assert usage["thoughtsTokenCount"] == 12
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"] + 12


def test_gemini_hides_thoughts_unless_asked_but_still_counts_them(server: Server):
    chunks = gemini(server.url, f"{MODEL}-think-10")
    assert not any(p.get("thought") for c in chunks for p in c["candidates"][0]["content"]["parts"])
    assert chunks[-1]["usageMetadata"]["thoughtsTokenCount"] == 10
    assert "thoughtsTokenCount" not in gemini(server.url, thinkingBudget=0)[-1]["usageMetadata"]


def test_the_google_sdk_parses_thought_parts(server: Server):
    sdk = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=server.url, api_version="v1beta"))
    cfg = types.GenerateContentConfig(
        max_output_tokens=30, thinking_config=types.ThinkingConfig(thinking_budget=12, include_thoughts=True)
    )
    chunks = list(sdk.models.generate_content_stream(model=MODEL, contents="Why is the sky blue?", config=cfg))
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    assert any(p.thought for p in parts)
    assert any(not p.thought and p.text for p in parts)
    assert chunks[-1].usage_metadata.thoughts_token_count == 12
    r = sdk.models.generate_content(model=MODEL, contents="Why is the sky blue?", config=cfg)
    assert r.candidates[0].content.parts[0].thought is True
    assert r.usage_metadata.thoughts_token_count == 12


def test_the_reasoning_profile_draws_a_thinking_length_per_request():
    with serve("--profile", "reasoning", "--sim-time-scale", "0.05") as s:
        counts = [
            chat(s.url, max_tokens=2000)[-1]["usage"]["completion_tokens_details"]["reasoning_tokens"] for _ in range(4)
        ]
        none = chat(s.url, max_tokens=4, thinking_tokens=0)[-1]["usage"]
    assert len(set(counts)) > 1, counts
    assert all(0 < n <= 2000 for n in counts), counts
    assert "completion_tokens_details" not in none
