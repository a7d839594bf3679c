"""The streams on the wire, over a fake engine: the OpenAI ones byte for byte as vLLM 0.11 writes them
(recordings of vLLM's own stream generators in vllm-0.11/), and nothing sent before the first token,
which is what every client that times its first chunk measures as TTFT."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from reference_server.api.gemini import GeminiAPI
from reference_server.api.openai import ChatRequest, CompletionRequest, OpenAIAPI
from reference_server.sequence import Delta, SamplingParams, Sequence

RECORDED = Path(__file__).parent / "vllm-0.11"
PROMPT = [101, 102, 103, 104]
TO_LENGTH = [Delta("Hello", 1), Delta(" world", 1), Delta("!", 1, "length")]
TO_STOP = [Delta("Hello", 1), Delta(" world", 1), Delta("", 1, "stop")]
USAGE = {"include_usage": True}
CASES: dict[str, tuple[dict[str, Any], list[Delta]]] = {
    "chat": ({}, TO_LENGTH),
    "chat-usage": ({"stream_options": USAGE}, TO_LENGTH),
    "chat-continuous-usage": ({"stream_options": USAGE | {"continuous_usage_stats": True}}, TO_LENGTH),
    "chat-continuous-without-usage": ({"stream_options": {"continuous_usage_stats": True}}, TO_LENGTH),
    "chat-stop-string": ({"stop": ["END"]}, TO_STOP),
    "completions": ({}, TO_LENGTH),
    "completions-usage": ({"stream_options": USAGE}, TO_LENGTH),
    "completions-continuous-usage": ({"stream_options": USAGE | {"continuous_usage_stats": True}}, TO_LENGTH),
    "completions-stop-string": ({"stop": ["END"]}, TO_STOP),
}


class Engine:
    """Hands the stream the deltas it is given, each once `gate` is open."""

    def __init__(self, deltas: list[Delta], gate: asyncio.Event | None = None) -> None:
        self.deltas, self.gate, self.aborted = deltas, gate, False
        self.cfg = SimpleNamespace(model_name="m", reasoning=SimpleNamespace(openai_field="reasoning_content"))

    async def output(self, seq: Sequence) -> AsyncIterator[Delta]:
        for d in self.deltas:
            if self.gate is not None:
                await self.gate.wait()
            yield d

    def abort(self, seq: Sequence) -> None:
        self.aborted = True


def openai_stream(name: str, engine: Engine) -> AsyncIterator[bytes]:
    extra, _ = CASES[name]
    chat = name.startswith("chat")
    seq = Sequence(PROMPT, SamplingParams(max_tokens=3))
    seq.stop_reason = "END" if "stop" in name else None  # what the engine notes at a stop string
    if chat:
        req: ChatRequest | CompletionRequest = ChatRequest(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True, **extra
        )
    else:
        req = CompletionRequest(model="m", prompt="p", stream=True, **extra)
    return OpenAIAPI(engine, None)._stream(req, seq, "chatcmpl-ID" if chat else "cmpl-ID", chat)  # type: ignore[arg-type]


async def drain(stream: AsyncIterator[bytes]) -> bytes:
    return b"".join([c async for c in stream])


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_openai_stream_is_the_bytes_vllm_writes(name: str):
    recorded = re.sub(r"^:.*\n", "", (RECORDED / f"{name}.sse").read_text(), flags=re.M).lstrip("\n")
    engine = Engine(CASES[name][1])
    got = asyncio.run(drain(openai_stream(name, engine))).decode()
    assert re.sub(r'"created":\d+', '"created":0', got) == recorded
    assert engine.aborted  # the sequence is let go however the stream ends


async def first_bytes_wait_for_the_first_token(stream: AsyncIterator[bytes], gate: asyncio.Event) -> bytes:
    first = asyncio.ensure_future(anext(stream))
    for _ in range(20):  # every other task runs meanwhile; the stream must still have nothing to send
        await asyncio.sleep(0)
    assert not first.done()
    gate.set()
    return await first + await anext(stream)


@pytest.mark.parametrize("name", ["chat", "completions"])
def test_an_openai_stream_sends_nothing_before_the_first_token(name: str):
    """vLLM sends the chat's role chunk in the iteration that brings the first token: a client that
    times its first chunk with choices (vllm bench, GuideLLM) reads TTFT there."""

    async def main() -> bytes:
        gate = asyncio.Event()
        return await first_bytes_wait_for_the_first_token(openai_stream(name, Engine(TO_LENGTH, gate)), gate)

    head = asyncio.run(main())
    assert b'"Hello"' in head
    assert (b'"delta":{"role":"assistant","content":""}' in head) == (name == "chat")


@pytest.mark.parametrize("sse", [True, False])
def test_a_gemini_stream_sends_nothing_before_the_first_token(sse: bool):
    """Nor does the Gemini stream, whether SSE or one JSON array (whose "[" comes with its first element)."""

    async def main() -> bytes:
        gate = asyncio.Event()
        api = GeminiAPI(Engine(TO_LENGTH, gate), None)  # type: ignore[arg-type]
        stream = api._stream(Sequence(PROMPT, SamplingParams(max_tokens=3)), sse, thoughts=False)
        return await first_bytes_wait_for_the_first_token(stream, gate)

    head = asyncio.run(main()).decode()
    assert head.startswith("data: {" if sse else "[{")
    assert '"text":"Hello"' in head


def test_a_gemini_array_with_no_element_is_still_an_array():
    api = GeminiAPI(Engine([]), None)  # type: ignore[arg-type]
    stream = api._stream(Sequence(PROMPT, SamplingParams(max_tokens=3)), sse=False, thoughts=False)
    assert asyncio.run(drain(stream)) == b"[]"


@pytest.mark.parametrize("name", ["chat-usage", "chat-continuous-usage", "completions-continuous-usage"])
@pytest.mark.parametrize("details", [True, False])
def test_cached_prompt_tokens_are_in_the_usage_only_with_the_flag_and_a_hit(name: str, details: bool):
    """vLLM's --enable-prompt-tokens-details: `prompt_tokens_details.cached_tokens` where the prefix
    cache held some of the prompt (a completion's chunks write the field as null otherwise)."""
    extra, deltas = CASES[name]
    chat = name.startswith("chat")
    seq = Sequence(PROMPT, SamplingParams(max_tokens=3))
    seq.num_cached_tokens = 3
    req: ChatRequest | CompletionRequest = (
        ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], stream=True, **extra)
        if chat
        else CompletionRequest(model="m", prompt="p", stream=True, **extra)
    )
    api = OpenAIAPI(Engine(deltas), None, details)  # type: ignore[arg-type]
    got = asyncio.run(drain(api._stream(req, seq, "ID", chat))).decode()
    usages = [e for e in got.split("\n\n") if '"usage":{' in e]
    assert usages
    for event in usages:
        assert ('"prompt_tokens_details":{"cached_tokens":3}' in event) == details, event
    if not details and not chat:
        assert all('"prompt_tokens_details":null' in e for e in usages if '"choices":[{' in e)


def test_a_gemini_usage_counts_the_cached_prompt_tokens_where_there_were_any():
    api = GeminiAPI(Engine([]), None)  # type: ignore[arg-type]
    seq = Sequence(PROMPT, SamplingParams(max_tokens=3))
    assert "cachedContentTokenCount" not in api._chunk(seq, "a", "stop", "ID", 1)["usageMetadata"]
    seq.num_cached_tokens = 16  # a whole block over a prompt of 4: never more than the prompt
    assert api._chunk(seq, "a", "stop", "ID", 1)["usageMetadata"]["cachedContentTokenCount"] == 4
