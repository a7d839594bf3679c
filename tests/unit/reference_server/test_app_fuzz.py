"""Fuzz tests of the reference server's request parsing (reference_server/app.py and api/).

Generated JSON bodies, valid-ish (each API's own fields with values off by a little or a lot) and
hostile (wrong types, huge numbers, NaN and Infinity tokens, lone surrogates, deep nesting, unknown
fields, bytes that are not JSON), against every endpoint of an in-process app whose sim engine costs
nothing. Properties: never a 5xx; every non-2xx in its API's own error shape; a 200 stream carries
no error event and ends with its terminator.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from llmchaos import languages
from reference_server.app import create_app
from reference_server.config import EngineConfig
from reference_server.engine import Engine
from reference_server.executors.sim import SimExecutor
from reference_server.profile import StepModel

pytestmark = pytest.mark.fuzz

MODEL = "llmchaos-sim-8b"
GEMINI = f"/v1beta/models/{MODEL}"
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """The real app on a zero-cost sim engine with a 64-token context, so that every request is short."""
    engine = Engine(EngineConfig(max_model_len=64, num_blocks=512), SimExecutor(StepModel()))
    with TestClient(create_app(engine), raise_server_exceptions=False) as c:
        deadline = time.monotonic() + 30
        while c.get("/healthz").status_code != 200:
            assert time.monotonic() < deadline, "the app never became ready"
            time.sleep(0.01)
        yield c


# -- generated bodies -------------------------------------------------------------------------------
# Plausible values first; a body is then sent as it is, or with one or two fields replaced by junk,
# added or left out, so that most requests get past parsing and a good share runs to the end.
words = st.text(max_size=12)  # no lone surrogates: those are junk
ANY_CHAR = st.characters(exclude_categories=())  # every code point, lone surrogates included
number = (
    st.integers(-3, 70)
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.floats(min_value=1e-300, max_value=0.01)  # tiny temperatures
)
junk = st.recursive(
    st.none() | st.booleans() | number | words | st.text(ANY_CHAR, max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(ANY_CHAR, max_size=8), inner, max_size=3),
    max_leaves=6,
)
unit = st.floats(min_value=0.0, max_value=1.0)
tiny = st.floats(min_value=1e-300, max_value=0.01)


def request(required: dict[str, st.SearchStrategy[Any]], optional: dict[str, Any]) -> st.SearchStrategy[dict]:
    """A plausible body with these fields; or one with a field set to junk, added, or left out."""
    fields = sorted({*required, *optional})
    plausible = st.fixed_dictionaries(required, optional=optional)

    def mutate(body: dict) -> st.SearchStrategy[dict]:
        replace = st.tuples(st.sampled_from(fields) | st.text(ANY_CHAR, max_size=8), junk)
        return replace.map(lambda kv: {**body, kv[0]: kv[1]}) | st.sampled_from([*body, None]).map(
            lambda drop: {k: v for k, v in body.items() if k != drop}
        )

    once = plausible.flatmap(mutate)
    return st.one_of(plausible, once, once.flatmap(mutate))


lang = st.sampled_from(sorted(languages.registry()))
sampling = {
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries(
        {}, optional={"include_usage": st.booleans(), "continuous_usage_stats": st.booleans()}
    ),
    "temperature": st.floats(0.0, 2.0) | tiny,
    "top_p": unit,
    "top_k": st.integers(-1, 50),
    "n": st.just(1),
    "max_tokens": st.integers(1, 8),
    "min_tokens": st.integers(0, 4),
    "stop": words | st.lists(words, max_size=4),
    "seed": st.integers(),
    "ignore_eos": st.booleans(),
    "user": words,
    "metadata": st.fixed_dictionaries({"lang": lang}),
}
message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "developer", "user", "assistant"]),
        "content": words | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": words}), max_size=2),
    },
    optional={"name": words},
)
chat = request(
    {"model": st.just(MODEL), "messages": st.lists(message, min_size=1, max_size=3)},
    {**sampling, "max_completion_tokens": st.integers(1, 8)},
)
completion = request(
    {
        "model": st.just(MODEL),
        "prompt": words | st.lists(words, max_size=2) | st.lists(st.integers(0, 5999), max_size=4),
    },
    sampling,
)
content = st.fixed_dictionaries(
    {"parts": st.lists(st.fixed_dictionaries({"text": words}), min_size=1, max_size=2)},
    optional={"role": st.sampled_from(["user", "model"])},
)
generation_config = st.fixed_dictionaries(
    {},
    optional={
        "temperature": st.floats(0.0, 2.0) | tiny,
        "topK": st.integers(1, 50),
        "top_p": unit,
        "maxOutputTokens": st.integers(1, 8),
        "stopSequences": st.lists(words.filter(bool), max_size=5),
        "candidateCount": st.just(1),
        "seed": st.integers(),
        "responseMimeType": st.just("text/plain"),
    },
)
generate = request(
    {"contents": st.lists(content, min_size=1, max_size=2)},
    {
        "systemInstruction": content,
        "generationConfig": generation_config,
        "safetySettings": st.lists(
            st.fixed_dictionaries(
                {
                    "category": st.sampled_from(["HARM_CATEGORY_HARASSMENT", "HARM_CATEGORY_HATE_SPEECH"]),
                    "threshold": st.sampled_from(["BLOCK_NONE", "OFF", "BLOCK_ONLY_HIGH"]),
                }
            ),
            max_size=2,
        ),
        "labels": st.fixed_dictionaries({"lang": lang}),
        "model": st.just(f"models/{MODEL}"),
    },
)
count_tokens = request({}, {"contents": st.lists(content, min_size=1, max_size=2), "generateContentRequest": generate})


def encoded(body: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """`body` as JSON (NaN and Infinity tokens, \\udXXX escapes) or as bytes that are hardly JSON at all."""
    as_json = body.map(lambda b: json.dumps(b, ensure_ascii=True).encode())
    hostile = st.one_of(
        junk.map(lambda b: json.dumps(b).encode()),
        st.binary(max_size=40),
        st.integers(1, 5000).map(lambda n: ("[" * n + "]" * n).encode()),
        st.just(f'{{"model": "{MODEL}", "prompt": {DEEP}, "messages": {DEEP}, "contents": {DEEP}}}'.encode()),
    )
    return st.one_of(as_json, as_json, as_json, hostile)


# -- the properties ---------------------------------------------------------------------------------
def check_openai(r: Any) -> None:
    event(f"status {r.status_code}")
    assert r.status_code < 500, r.text
    if r.status_code != 200:
        err = r.json()["error"]
        assert set(r.json()) == {"error"}, r.text
        assert set(err) == {"message", "type", "param", "code"}, err
        assert isinstance(err["message"], str)
        assert err["message"]
        return
    if r.headers["content-type"].startswith("text/event-stream"):
        data = [line[6:] for line in r.text.split("\n") if line.startswith("data: ")]
        assert data[-1] == "[DONE]", data[-3:]
        assert all("error" not in json.loads(d) for d in data[:-1]), data
    else:
        assert r.json()["choices"][0]["finish_reason"] in ("stop", "length"), r.text


def check_gemini(r: Any, sse: bool) -> None:
    event(f"status {r.status_code}")
    assert r.status_code < 500, r.text
    if r.status_code != 200:
        body = r.json()
        assert set(body) == {"error"}, body
        assert set(body["error"]) == {"code", "message", "status"}, body
        assert body["error"]["code"] == r.status_code
        assert isinstance(body["error"]["message"], str)
        assert body["error"]["message"]
        return
    chunks = [json.loads(line[6:]) for line in r.text.split("\r\n") if line.startswith("data: ")] if sse else r.json()
    chunks = chunks if isinstance(chunks, list) else [chunks]
    assert all("error" not in c for c in chunks), chunks
    if "totalTokens" not in chunks[-1]:
        assert chunks[-1]["candidates"][0]["finishReason"] in ("STOP", "MAX_TOKENS"), chunks[-1]


def post(client: TestClient, path: str, raw: bytes) -> Any:
    return client.post(path, content=raw, headers={"content-type": "application/json"})


@given(raw=encoded(chat))
@example(raw=json.dumps({"model": "\ud800", "messages": [{"role": "user", "content": "\ud800"}]}).encode())
@example(
    raw=json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": 0.001}).encode()
)
@example(raw=DEEP.encode())
def test_chat_completions_answer_in_openai_shape(client: TestClient, raw: bytes) -> None:
    check_openai(post(client, "/v1/chat/completions", raw))


@given(raw=encoded(completion))
@example(raw=json.dumps({"model": MODEL, "prompt": "hi", "temperature": 0.001, "stream": True}).encode())
@example(raw=json.dumps({"model": MODEL, "prompt": ["\udc00\ud800"]}).encode())
@example(raw=DEEP.encode())
def test_completions_answer_in_openai_shape(client: TestClient, raw: bytes) -> None:
    check_openai(post(client, "/v1/completions", raw))


@pytest.mark.parametrize("method", ["generateContent", "streamGenerateContent?alt=sse", "streamGenerateContent"])
@given(raw=encoded(generate))
@example(raw=json.dumps({"contents": [{"parts": [{"text": "\ud800"}]}]}).encode())
@example(
    raw=json.dumps({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"temperature": 1e-9}}).encode()
)
@example(raw=DEEP.encode())
def test_generate_content_answers_in_gemini_shape(client: TestClient, method: str, raw: bytes) -> None:
    check_gemini(post(client, f"{GEMINI}:{method}", raw), sse=method.endswith("alt=sse"))


@given(raw=encoded(count_tokens))
@example(raw=json.dumps({"contents": [{"parts": [{"text": "\ud800"}]}]}).encode())
@example(raw=DEEP.encode())
def test_count_tokens_answers_in_gemini_shape(client: TestClient, raw: bytes) -> None:
    check_gemini(post(client, f"{GEMINI}:countTokens", raw), sse=False)
