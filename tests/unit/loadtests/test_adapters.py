import json

import orjson
import pytest

from loadtests.adapters import ADAPTERS, Ask, Message, Tool, ToolCall, add_pieces


def test_openai_chat_events():
    a = ADAPTERS["openai-chat"]
    assert a.event("[DONE]").done
    ev = a.event(json.dumps({"choices": [{"index": 0, "delta": {"content": "hi"}}]}))
    assert ev.text == "hi"
    assert not ev.done
    usage = a.event(json.dumps({"choices": [], "usage": {"completion_tokens": 7}}))
    assert usage.usage_tokens == 7
    err = a.event(json.dumps({"error": {"message": "boom", "code": 503}}))
    assert (err.error, err.error_code, err.done) == ("boom", 503, True)
    with pytest.raises(ValueError):  # noqa: PT011 - any ValueError is the contract (Adapter.event's docstring)
        a.event('{"choices": [}')


def test_gemini_terminator_is_the_finish_reason_chunk():
    g = ADAPTERS["gemini"]
    mid = g.event(json.dumps({"candidates": [{"content": {"parts": [{"text": "x"}]}}]}))
    end = g.event(
        json.dumps(
            {
                "candidates": [{"content": {"parts": [{"text": "y"}]}, "finishReason": "STOP"}],
                "usageMetadata": {"candidatesTokenCount": 2},
            }
        )
    )
    assert (mid.text, mid.done) == ("x", False)
    assert (end.done, end.usage_tokens) == (True, 2)
    call = g.call(Ask("m", "ja", "p", 8, lang_in_body=True, api_key="k"))
    assert call.path == "/v1beta/models/m:streamGenerateContent?alt=sse"
    assert call.headers["x-goog-api-key"] == "k"
    assert json.loads(call.body)["labels"] == {"lang": "ja"}


def test_openai_reasoning_and_tool_calls():
    """vLLM's `reasoning_content` and newer `reasoning` deltas are thinking; tool-call deltas answer."""
    a = ADAPTERS["openai-chat"]
    for field in ("reasoning_content", "reasoning"):
        ev = a.event(json.dumps({"choices": [{"index": 0, "delta": {field: "hmm"}}]}))
        assert (ev.text, ev.reasoning) == ("", "hmm")
    both = a.event(json.dumps({"choices": [{"index": 0, "delta": {"reasoning_content": "so", "content": "Yes"}}]}))
    assert (both.text, both.reasoning) == ("Yes", "so")
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"q":'}}
    tool = a.event(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
    assert tool.text == 'get{"q":'
    usage = {"completion_tokens": 9, "completion_tokens_details": {"reasoning_tokens": 4}}
    end = a.event(json.dumps({"choices": [], "usage": usage}))
    assert (end.usage_tokens, end.usage_reasoning) == (9, 4)
    body = a.body(
        json.dumps({"choices": [{"message": {"content": "Yes", "reasoning_content": "hmm"}}], "usage": usage}).encode()
    )
    assert (body.text, body.reasoning, body.usage_tokens, body.usage_reasoning, body.done) == ("Yes", "hmm", 9, 4, True)


def test_gemini_thoughts_are_thinking_and_counted_apart_in_usage():
    g = ADAPTERS["gemini"]
    parts = [{"text": "hmm", "thought": True}, {"text": "Yes"}, {"functionCall": {"name": "get", "args": {"q": 1}}}]
    mid = g.event(json.dumps({"candidates": [{"content": {"parts": parts}}]}))
    assert (mid.reasoning, mid.text) == ("hmm", 'Yes{"name": "get", "args": {"q": 1}}')
    usage = {"candidatesTokenCount": 5, "thoughtsTokenCount": 4}  # Gemini's candidates leave thoughts out
    end = g.event(
        json.dumps({"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}], "usageMetadata": usage})
    )
    assert (end.usage_tokens, end.usage_reasoning) == (9, 4)


def test_gemini_asks_for_thoughts_only_when_told():
    g = ADAPTERS["gemini"]
    plain = json.loads(g.call(Ask("m", "en", "p", 8)).body)
    shown = json.loads(g.call(Ask("m", "en", "p", 8, thoughts=True)).body)
    assert "thinkingConfig" not in plain["generationConfig"]
    assert shown["generationConfig"]["thinkingConfig"] == {"includeThoughts": True}


def openai_usage(usage: dict) -> str:
    return json.dumps({"choices": [], "usage": usage})


def gemini_end(usage: dict, parts: list | None = None) -> str:
    cand = {"content": {"parts": parts or []}, "finishReason": "STOP"}
    return json.dumps({"candidates": [cand], "usageMetadata": usage})


@pytest.mark.parametrize(
    ("api", "data", "why"),
    [
        ("openai-chat", openai_usage({"completion_tokens": "10"}), "completion_tokens is not a whole number"),
        ("openai-chat", openai_usage({"completion_tokens": 10.5}), "completion_tokens is not a whole number"),
        ("openai-chat", openai_usage({"completion_tokens": True}), "completion_tokens is not a whole number"),
        ("openai-chat", openai_usage({"completion_tokens": -3}), "completion_tokens is not a whole number"),
        (
            "openai-chat",
            openai_usage({"completion_tokens": 10, "completion_tokens_details": {"reasoning_tokens": 500}}),
            "reasoning_tokens 500 is more than completion_tokens 10",
        ),
        (
            "openai-chat",
            openai_usage({"completion_tokens": 10, "completion_tokens_details": {"reasoning_tokens": -1}}),
            "reasoning_tokens is not a whole number",
        ),
        ("gemini", gemini_end({"candidatesTokenCount": "5"}), "candidatesTokenCount is not a whole number"),
        ("gemini", gemini_end({"candidatesTokenCount": 5, "thoughtsTokenCount": -2}), "thoughtsTokenCount is not"),
    ],
)
def test_a_usage_count_that_is_no_whole_number_of_tokens_is_refused_where_parsed(api, data, why):
    with pytest.raises(ValueError, match=why):
        ADAPTERS[api].event(data)


def test_a_non_stream_body_refuses_bad_usage_too():
    body = {"choices": [{"message": {"content": "hi"}}], "usage": {"completion_tokens": 1e9 + 0.5}}
    with pytest.raises(ValueError, match="completion_tokens is not a whole number"):
        ADAPTERS["openai-chat"].body(json.dumps(body).encode())


def test_gemini_keeps_the_thoughts_count_where_the_answer_count_is_left_out_as_zero():
    end = ADAPTERS["gemini"].event(gemini_end({"promptTokenCount": 3, "thoughtsTokenCount": 7}))
    assert (end.usage_tokens, end.usage_reasoning) == (7, 7)


def test_gemini_thinking_is_thought_true_only():
    parts = [{"text": "a", "thought": "false"}, {"text": "b", "thought": 1}, {"text": "c", "thought": True}]
    ev = ADAPTERS["gemini"].event(json.dumps({"candidates": [{"content": {"parts": parts}}]}))
    assert (ev.reasoning, ev.text) == ("c", "ab")


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions", "gemini"])
def test_a_call_is_its_prompts_body_patched_as_asked(api):
    """One builder: the load test's call is the replay's patch over the prompt's own body."""
    a = ADAPTERS[api]
    ask = Ask("m", "de", "Hallo", 7, lang_in_body=True, api_key="k", thoughts=api == "gemini")
    call = a.call(ask)
    assert call.max_tokens == 7
    assert call.headers["x-llmchaos-lang"] == "de"
    recorded = {"openai-chat": "messages", "openai-completions": "prompt", "gemini": "contents"}[api]
    assert recorded in json.loads(call.body)
    assert a.patch(json.loads(call.body), ask) == call  # patching again changes nothing


def said(*pairs: tuple[str, str]) -> tuple[Message, ...]:
    return tuple(m for p, a in pairs for m in (Message("user", p), Message("assistant", a)))


def test_a_conversation_sends_its_earlier_turns_in_each_apis_roles():
    ask = Ask("m", "en", "and now?", history=said(("hi", "hello"), ("why", "because")))
    chat = orjson.loads(ADAPTERS["openai-chat"].call(ask).body)["messages"]
    assert chat == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "why"},
        {"role": "assistant", "content": "because"},
        {"role": "user", "content": "and now?"},
    ]
    gemini = orjson.loads(ADAPTERS["gemini"].call(ask).body)["contents"]
    assert [(c["role"], c["parts"][0]["text"]) for c in gemini] == [
        ("user", "hi"),
        ("model", "hello"),
        ("user", "why"),
        ("model", "because"),
        ("user", "and now?"),
    ]
    assert orjson.loads(ADAPTERS["openai-completions"].call(ask).body)["prompt"] == "hi\nhello\nwhy\nbecause\nand now?"


def test_cached_prompt_tokens_are_read_from_either_apis_usage():
    chat = ADAPTERS["openai-chat"]
    usage = {"completion_tokens": 2, "prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 32}}
    ev = chat.event(json.dumps({"choices": [], "usage": usage}))
    assert (ev.usage_prompt, ev.usage_cached) == (40, 32)
    ev = chat.event(json.dumps({"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 40}}))
    assert (ev.usage_prompt, ev.usage_cached) == (40, None)  # vLLM without the flag: not said
    with pytest.raises(ValueError, match="cached_tokens 41 is more than prompt_tokens 40"):
        chat.event(json.dumps({"choices": [], "usage": {**usage, "prompt_tokens_details": {"cached_tokens": 41}}}))
    with pytest.raises(ValueError, match="cached_tokens is not a whole number"):
        chat.event(json.dumps({"choices": [], "usage": {**usage, "prompt_tokens_details": {"cached_tokens": "x"}}}))
    gemini = ADAPTERS["gemini"]
    end = {"candidates": [{"content": {"parts": [{"text": "a"}]}, "finishReason": "STOP"}]}
    ev = gemini.event(json.dumps(end | {"usageMetadata": {"promptTokenCount": 40, "cachedContentTokenCount": 32}}))
    assert (ev.usage_prompt, ev.usage_cached) == (40, 32)
    ev = gemini.event(json.dumps(end | {"usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 1}}))
    assert (ev.usage_prompt, ev.usage_cached) == (40, 0)  # proto3 leaves the zero out


CALL = ToolCall("call-1", "search", '{"query": "rain"}')
TOOL = Tool("search", "Search.", {"type": "object", "properties": {"query": {"type": "string"}}})


def test_a_tool_hop_sends_the_call_and_its_result_in_each_apis_shape():
    history = (*said(("hi", "hello")), Message("user", "rain?"), Message("assistant", calls=(CALL,)))
    ask = Ask("m", "en", "", history=(*history, Message("tool", "it rains", call=CALL)), tools=(TOOL,))
    chat = orjson.loads(ADAPTERS["openai-chat"].call(ask).body)
    assert chat["messages"][-2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call-1", "type": "function", "function": {"name": "search", "arguments": '{"query": "rain"}'}}]},
        {"role": "tool", "tool_call_id": "call-1", "content": "it rains"},
    ]  # fmt: skip
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "search", "description": "Search.", "parameters": TOOL.parameters}}
    ]
    gemini = orjson.loads(ADAPTERS["gemini"].call(ask).body)
    assert gemini["contents"][-2:] == [
        {"role": "model", "parts": [{"functionCall": {"name": "search", "args": {"query": "rain"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "search", "response": {"result": "it rains"}}}]},
    ]
    assert gemini["tools"] == [
        {"functionDeclarations": [{"name": "search", "description": "Search.", "parameters": TOOL.parameters}]}
    ]


def test_tool_call_pieces_stream_into_whole_calls():
    chat, calls = ADAPTERS["openai-chat"], []
    head = {"id": "c9", "type": "function", "index": 0, "function": {"name": "search", "arguments": '{"q'}}
    for delta in ({"tool_calls": [head]}, {"tool_calls": [{"index": 0, "function": {"arguments": '": 1}'}}]}):
        ev = chat.event(json.dumps({"choices": [{"index": 0, "delta": delta}]}))
        assert ev.text  # a call's pieces are tokens: they time TTFT and ITL
        add_pieces(calls, ev.calls)
    assert calls == [ToolCall("c9", "search", '{"q": 1}')]
    with pytest.raises(ValueError, match="tool call index"):
        chat.event(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "0"}]}}]}))
    gemini, calls = ADAPTERS["gemini"], []
    for args in ({"a": 1}, {"b": 2}):  # Gemini sends each call whole
        part = {"functionCall": {"name": "lookup", "args": args}}
        add_pieces(calls, gemini.event(json.dumps({"candidates": [{"content": {"parts": [part]}}]})).calls)
    assert calls == [ToolCall(None, "lookup", '{"a": 1}'), ToolCall(None, "lookup", '{"b": 2}')]
    body = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [head]}}], "usage": {}}
    ev = chat.body(json.dumps(body).encode())
    assert (ev.text, ev.calls) == ('search{"q', ((0, "c9", "search", '{"q'),))
