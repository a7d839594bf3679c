"""Tool calls as the reference server makes them (reference_server/api/tools.py): which answers call
a tool, for a given seed, and how a call goes on each API's wire, over a fake engine."""

from __future__ import annotations

import asyncio
import json

import pytest

from reference_server.api.gemini import GeminiAPI, GenerateRequest
from reference_server.api.openai import ChatRequest, OpenAIAPI
from reference_server.api.tools import AUTO_HOPS, Offered, choose
from reference_server.sequence import Delta, SamplingParams, Sequence
from tests.unit.reference_server.api.test_stream_wire import PROMPT, TO_LENGTH, Engine, drain

SEARCH = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "query": {"type": "string"}},
    "required": ["query"],
}
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": SEARCH}}]
QUOTED = [Delta('say "hi"', 1), Delta(" now", 1), Delta("", 1, "stop")]


def test_the_first_string_parameter_takes_the_text():
    assert Offered.of("s", SEARCH).argument == "query"
    assert (
        Offered.of("s", {"properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["b"]}).argument
        == "b"
    )
    assert Offered.of("s", None).argument is None


def test_auto_calls_on_one_or_two_hops_after_each_user_message_the_same_for_a_seed():
    tools = [Offered("a", "x"), Offered("b", "y")]
    hops = set()
    for user in range(50):
        n = next(h for h in range(AUTO_HOPS + 1) if choose(tools, "auto", None, 7, f"q{user}", h) is None)
        assert n == next(h for h in range(AUTO_HOPS + 1) if choose(tools, "auto", None, 7, f"q{user}", h) is None)
        hops.add(n)
    assert hops == {1, 2}
    assert choose(tools, "none", None, 7, "q", 0) is None
    assert choose([], "auto", None, 7, "q", 0) is None
    assert choose(tools, "required", None, 7, "q", 9) is not None  # forced: every time
    forced = choose(tools, "required", "b", 7, "q", 0)
    assert forced is not None
    assert forced.tool.name == "b"


def chat(messages: list[dict], **more) -> ChatRequest:
    return ChatRequest(model="m", messages=messages, tools=TOOLS, seed=1, **more)


def test_a_chat_request_counts_its_hops_since_the_last_user_message():
    call = {"id": "c", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    first = [{"role": "user", "content": "q"}]
    hop = [*first, {"role": "assistant", "tool_calls": [call]}, {"role": "tool", "tool_call_id": "c", "content": "r"}]
    assert chat(first).tool_call() is not None
    assert chat(first, tool_choice="none").tool_call() is None
    many = (
        hop
        + [{"role": "assistant", "tool_calls": [call]}, {"role": "tool", "tool_call_id": "c", "content": "r"}]
        * AUTO_HOPS
    )
    assert chat(many).tool_call() is None  # auto: never more than AUTO_HOPS
    assert chat(many, tool_choice="required").tool_call() is not None
    with pytest.raises(ValueError, match="tool_call_id"):
        chat([*first, {"role": "tool", "content": "r"}])
    with pytest.raises(ValueError, match="no tool named"):
        chat(first, tool_choice={"type": "function", "function": {"name": "other"}})


def test_a_chat_stream_names_the_call_first_then_streams_its_arguments_and_ends_with_tool_calls():
    req = chat([{"role": "user", "content": "q"}], stream=True, tool_choice="required")
    call = req.tool_call()
    seq = Sequence(PROMPT, SamplingParams(max_tokens=3))
    raw = asyncio.run(drain(OpenAIAPI(Engine(QUOTED), None)._stream(req, seq, "chatcmpl-ID", True, call)))  # type: ignore[arg-type]
    chunks = [json.loads(line[6:]) for line in raw.decode().split("\n\n") if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    (head,) = deltas[1]["tool_calls"]
    assert (head["index"], head["type"], head["function"]["name"]) == (0, "function", "search")
    assert head["id"].startswith("chatcmpl-tool-")
    assert all(set(d["tool_calls"][0]) == {"index", "function"} for d in deltas[2:])
    arguments = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:])
    assert json.loads(arguments) == {"query": 'say "hi" now'}  # valid JSON whatever the tokens
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, None, "tool_calls"]


@pytest.mark.parametrize("sse", [True, False])
def test_a_gemini_stream_sends_the_call_whole_in_its_last_chunk(sse: bool):
    tools = [{"functionDeclarations": [{"name": "search", "parameters": SEARCH}]}]
    req = GenerateRequest.model_validate(
        {"contents": [{"role": "user", "parts": [{"text": "q"}]}], "tools": tools,
         "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}
    )  # fmt: skip
    seq = Sequence(PROMPT, SamplingParams(max_tokens=3))
    raw = asyncio.run(drain(GeminiAPI(Engine(TO_LENGTH), None)._stream(seq, sse, False, req.tool_call())))  # type: ignore[arg-type]
    if sse:
        (chunk,) = [json.loads(line[6:]) for line in raw.decode().split("\r\n\r\n") if line.startswith("data: ")]
    else:
        (chunk,) = json.loads(raw)
    cand = chunk["candidates"][0]
    assert cand["content"]["parts"] == [{"functionCall": {"name": "search", "args": {"query": "Hello world!"}}}]
    assert cand["finishReason"] == "STOP"  # Gemini ends a call so, whatever the length
    assert chunk["usageMetadata"]["candidatesTokenCount"] == 3


def test_gemini_counts_hops_by_function_responses_and_mode_none_forbids():
    call = {"role": "model", "parts": [{"functionCall": {"name": "search", "args": {}}}]}
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "search", "response": {"r": 1}}}]}
    body = {
        "contents": [{"role": "user", "parts": [{"text": "q"}]}],
        "tools": [{"functionDeclarations": [{"name": "search"}]}],
    }
    assert GenerateRequest.model_validate(body).tool_call() is not None
    hopped = {**body, "contents": body["contents"] + [call, answer] * AUTO_HOPS}
    assert GenerateRequest.model_validate(hopped).tool_call() is None
    none = {**body, "toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}
    assert GenerateRequest.model_validate(none).tool_call() is None
    with pytest.raises(ValueError, match="exactly one of"):
        GenerateRequest.model_validate({"contents": [{"parts": [{"text": "a", "functionCall": {"name": "s"}}]}]})
