import json

import pytest

from loadtests.adapters import ADAPTERS


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
    call = g.call("m", "p", "ja", 8, True, True, "k")
    assert call.path == "/v1beta/models/m:streamGenerateContent?alt=sse"
    assert call.headers["x-goog-api-key"] == "k"
    assert json.loads(call.body)["labels"] == {"lang": "ja"}
