"""The reference server's Gemini-compatible API (v1beta), driven over real HTTP on loopback.

Three server processes in all (module-scoped): the main one, one with `--api-key` and a small
`--max-model-len`, and one that starts slowly and admits one request at a time (503 while
starting, then 429 when its waiting queue is full).
"""

from __future__ import annotations

import json

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from llmchaos import tokenizer
from llmchaos.sse_codec import Decoder
from tests.integration.conftest import (
    SMALL_BODY,
    SMALL_LEN,
    ascii_ratio,
    burst,
    chunked,
    cjk_ratio,
    pick_stop,
    wait_ready,
)
from tests.procs import Server

MODEL = "llmchaos-sim-8b"
KEY = "goog-test-key"
BASE = f"/v1beta/models/{MODEL}"
CONTENTS = [{"role": "user", "parts": [{"text": "Tell me something interesting."}]}]


# -- helpers ------------------------------------------------------------------------------------
def body(**gen) -> dict:
    return {"contents": CONTENTS, "generationConfig": gen} if gen else {"contents": CONTENTS}


def sse(client: httpx.Client, req: dict, headers: dict | None = None, path: str = BASE) -> list[dict]:
    """streamGenerateContent?alt=sse: every event's JSON, in order (the stream must end cleanly)."""
    dec, events = Decoder(), []
    with client.stream("POST", path + ":streamGenerateContent?alt=sse", json=req, headers=headers) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for chunk in r.iter_raw():
            events.extend(dec.feed(chunk))
    assert not dec.pending()
    return [json.loads(e.data) for e in events]


def generate(client: httpx.Client, req: dict, headers: dict | None = None) -> dict:
    r = client.post(BASE + ":generateContent", json=req, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def text_of(chunk: dict) -> str:
    return chunk["candidates"][0]["content"]["parts"][0]["text"]


def count_tokens(client: httpx.Client, req: dict) -> int:
    r = client.post(BASE + ":countTokens", json=req)
    assert r.status_code == 200, r.text
    return r.json()["totalTokens"]


def check_chunks(chunks: list[dict], max_tokens: int) -> tuple[str, str, dict]:
    """Shape of a stream's chunks; returns (text, finishReason, last usageMetadata)."""
    assert chunks
    assert len({c["responseId"] for c in chunks}) == 1
    totals = []
    for i, c in enumerate(chunks):
        (cand,) = c["candidates"]
        assert cand["index"] == 0
        assert cand["content"]["role"] == "model"
        assert len(cand["content"]["parts"]) == 1
        assert isinstance(text_of(c), str)
        assert c["modelVersion"] == MODEL
        u = c["usageMetadata"]
        totals.append(u["totalTokenCount"])
        if i < len(chunks) - 1:
            assert "finishReason" not in cand
            assert "candidatesTokenCount" not in u
            assert text_of(c)
    assert totals == sorted(set(totals)), "totalTokenCount must grow with every chunk"
    assert {c["usageMetadata"]["promptTokenCount"] for c in chunks} == {chunks[0]["usageMetadata"]["promptTokenCount"]}
    last = chunks[-1]
    reason = last["candidates"][0]["finishReason"]
    text = "".join(text_of(c) for c in chunks)
    check_usage(text, reason, last["usageMetadata"], max_tokens)
    assert len([c for c in chunks if text_of(c)]) <= last["usageMetadata"]["candidatesTokenCount"]
    return text, reason, last["usageMetadata"]


def check_usage(text: str, reason: str, u: dict, max_tokens: int) -> None:
    assert reason in ("MAX_TOKENS", "STOP")
    n = u["candidatesTokenCount"]
    assert u["totalTokenCount"] == u["promptTokenCount"] + n
    if reason == "MAX_TOKENS":
        assert n == max_tokens
    else:
        assert n <= max_tokens
    # the text is what those tokens spell: re-tokenized, it is (within the EOS token) as long
    assert abs(tokenizer.count(text) - n) <= 1, (text, n)


def assert_error(r: httpx.Response, code: int, status: str) -> str:
    assert r.status_code == code, r.text
    b = r.json()
    assert set(b) == {"error"}, b
    assert set(b["error"]) == {"code", "message", "status"}, b
    assert b["error"]["code"] == code, b
    assert b["error"]["status"] == status, b
    assert isinstance(b["error"]["message"], str)
    assert b["error"]["message"]
    return b["error"]["message"]


def sdk_client(server: Server, key: str = "k") -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=server.url, api_version="v1beta"))


# -- servers ------------------------------------------------------------------------------------
# -- streaming ------------------------------------------------------------------------------------
def test_stream_sse_shape_and_usage(client: httpx.Client):
    chunks = sse(client, body(maxOutputTokens=20, temperature=0))
    text, reason, usage = check_chunks(chunks, 20)
    assert text
    assert usage["promptTokenCount"] == count_tokens(client, {"contents": CONTENTS})
    # the same request without streaming gives the same text and usage, less the prompt's leading
    # blocks that it finds in the prefix cache the stream left (Gemini's implicit caching)
    g = generate(client, body(maxOutputTokens=20, temperature=0))
    assert text_of(g) == text
    assert g["candidates"][0]["finishReason"] == reason
    cached = g["usageMetadata"].pop("cachedContentTokenCount")
    assert 0 < cached <= usage["promptTokenCount"]
    usage.pop("cachedContentTokenCount", None)  # what the stream found from the tests before it
    assert g["usageMetadata"] == usage


def test_stream_without_alt_sse_is_a_json_array(client: httpx.Client):
    r = client.post(BASE + ":streamGenerateContent", json=body(maxOutputTokens=15, temperature=0))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    chunks = json.loads(r.text)
    assert isinstance(chunks, list)
    text, reason, usage = check_chunks(chunks, 15)
    sse_text, sse_reason, sse_usage = check_chunks(sse(client, body(maxOutputTokens=15, temperature=0)), 15)
    assert (text, reason, usage) == (sse_text, sse_reason, sse_usage)


def test_stream_max_tokens_and_natural_stop(client: httpx.Client):
    # a long budget: at seed 1 the paragraph ends (EOS) before it
    chunks = sse(client, body(maxOutputTokens=300, seed=1))
    _text, reason, usage = check_chunks(chunks, 300)
    assert reason == "STOP"
    assert usage["candidatesTokenCount"] < 300
    chunks = sse(client, body(maxOutputTokens=6, temperature=0))
    _, reason, usage = check_chunks(chunks, 6)
    assert reason == "MAX_TOKENS"
    assert usage["candidatesTokenCount"] == 6


# -- generateContent / countTokens ----------------------------------------------------------------
def test_generate_content_shape(client: httpx.Client):
    g = generate(client, body(maxOutputTokens=12, temperature=0))
    assert set(g) == {"candidates", "usageMetadata", "modelVersion", "responseId"}
    (cand,) = g["candidates"]
    assert cand["content"]["role"] == "model"
    assert cand["index"] == 0
    check_usage(text_of(g), cand["finishReason"], g["usageMetadata"], 12)
    assert g["modelVersion"] == MODEL
    # the model may be named with its "models/" prefix too
    r = client.post(f"/v1beta/models/models/{MODEL}:generateContent", json=body(maxOutputTokens=12, temperature=0))
    assert r.status_code == 200
    assert text_of(r.json()) == text_of(g)


def test_count_tokens_matches_prompt_token_count(client: httpx.Client):
    contents = [
        {"role": "user", "parts": [{"text": "Hello there."}, {"text": " How are you?"}]},
        {"role": "model", "parts": [{"text": "Fine, thanks."}]},
        {"role": "user", "parts": [{"text": "Tell me about caching."}]},
    ]
    n = count_tokens(client, {"contents": contents})
    g = generate(client, {"contents": contents, "generationConfig": {"maxOutputTokens": 2}})
    assert n == g["usageMetadata"]["promptTokenCount"]
    assert n > tokenizer.count("Hello there.")
    longer = count_tokens(client, {"contents": [*contents, {"parts": [{"text": "More words here."}]}]})
    assert longer > n
    assert_error(client.post(BASE + ":countTokens", json={}), 400, "INVALID_ARGUMENT")
    assert_error(client.post(BASE + ":countTokens", json={"contents": [{"parts": []}]}), 400, "INVALID_ARGUMENT")


def test_count_tokens_generate_content_request_with_model(client: httpx.Client):
    req = {"contents": CONTENTS, "systemInstruction": {"parts": [{"text": "Be terse."}]}}
    g = generate(client, {**req, "generationConfig": {"maxOutputTokens": 2}})
    n = count_tokens(client, {"generateContentRequest": {"model": f"models/{MODEL}", **req}})
    assert n == g["usageMetadata"]["promptTokenCount"]


def test_system_instruction(client: httpx.Client):
    plain = generate(client, body(maxOutputTokens=3))
    sys = {"parts": [{"text": "You are a very helpful assistant who answers briefly."}]}
    camel = generate(client, {**body(maxOutputTokens=3, temperature=0), "systemInstruction": sys})
    snake = generate(
        client,
        {
            "contents": CONTENTS,
            "system_instruction": sys,
            "generation_config": {"max_output_tokens": 3, "temperature": 0},
        },
    )
    p0, p1 = plain["usageMetadata"]["promptTokenCount"], camel["usageMetadata"]["promptTokenCount"]
    assert p1 >= p0 + tokenizer.count(sys["parts"][0]["text"])
    assert snake["usageMetadata"]["promptTokenCount"] == p1
    assert text_of(snake) == text_of(camel)
    # countTokens counts the system turn when given the whole request
    assert count_tokens(client, {"generateContentRequest": {"contents": CONTENTS, "systemInstruction": sys}}) == p1
    assert_error(
        client.post(
            BASE + ":generateContent",
            json={"contents": CONTENTS, "systemInstruction": {"parts": [{"text": "x"}], "role": "system"}},
        ),
        400,
        "INVALID_ARGUMENT",
    )


# -- generationConfig ----------------------------------------------------------------------------
def _text(client: httpx.Client, **gen) -> str:
    return text_of(generate(client, body(maxOutputTokens=30, **gen)))


def test_temperature_zero_is_deterministic(client: httpx.Client):
    a, b = _text(client, temperature=0), _text(client, temperature=0)
    assert a
    assert a == b


def test_seed_reproduces_and_different_seeds_differ(client: httpx.Client):
    assert _text(client, seed=5) == _text(client, seed=5)
    assert _text(client, seed=5) != _text(client, seed=6)


def test_top_k_and_top_p_narrow_sampling(client: httpx.Client):
    """topK=1 (or a tiny topP) leaves one candidate per step: the seed no longer matters."""
    a = _text(client, temperature=1, topK=1, seed=1)
    b = _text(client, temperature=1, topK=1, seed=2)
    c = _text(client, temperature=1, topP=1e-6, seed=3)
    assert a
    assert a == b == c
    assert _text(client, temperature=1, topK=40, seed=1) != _text(client, temperature=1, topK=40, seed=2)


def test_max_output_tokens_honoured(client: httpx.Client):
    for n in (1, 5, 17):
        g = generate(client, body(maxOutputTokens=n, temperature=0))
        u = g["usageMetadata"]
        assert u["candidatesTokenCount"] <= n
        if g["candidates"][0]["finishReason"] == "MAX_TOKENS":
            assert u["candidatesTokenCount"] == n


def test_stop_sequences_honoured(client: httpx.Client):
    full = text_of(generate(client, body(maxOutputTokens=50, temperature=0)))
    stop = pick_stop(full)
    prefix = full[: full.index(stop)]
    assert prefix
    g = generate(client, body(maxOutputTokens=50, temperature=0, stopSequences=["zzzz-never", stop]))
    assert text_of(g) == prefix
    assert g["candidates"][0]["finishReason"] == "STOP"
    assert g["usageMetadata"]["candidatesTokenCount"] < 50
    chunks = sse(client, body(maxOutputTokens=50, temperature=0, stopSequences=[stop]))
    assert "".join(text_of(c) for c in chunks) == prefix
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    snake = generate(
        client,
        {
            "contents": CONTENTS,
            "generation_config": {"max_output_tokens": 50, "temperature": 0, "stop_sequences": [stop]},
        },
    )
    assert text_of(snake) == prefix


def test_candidate_count(client: httpx.Client):
    assert generate(client, body(maxOutputTokens=2, candidateCount=1))["candidates"][0]["index"] == 0
    msg = assert_error(client.post(BASE + ":generateContent", json=body(candidateCount=2)), 400, "INVALID_ARGUMENT")
    assert "candidateCount" in msg


def test_snake_case_names_match_camel_case(client: httpx.Client):
    camel = generate(
        client,
        {
            "contents": CONTENTS,
            "generationConfig": {
                "maxOutputTokens": 9,
                "temperature": 0.7,
                "topK": 5,
                "topP": 0.9,
                "seed": 3,
                "candidateCount": 1,
            },
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
    )
    snake = generate(
        client,
        {
            "contents": CONTENTS,
            "generation_config": {
                "max_output_tokens": 9,
                "temperature": 0.7,
                "top_k": 5,
                "top_p": 0.9,
                "seed": 3,
                "candidate_count": 1,
            },
            "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
    )
    assert text_of(camel) == text_of(snake)
    assert camel["usageMetadata"] == snake["usageMetadata"]


# -- safetySettings -------------------------------------------------------------------------------
def test_safety_settings_valid_are_accepted(client: httpx.Client):
    settings = [
        {"category": c, "threshold": t}
        for c, t in [
            ("HARM_CATEGORY_HARASSMENT", "BLOCK_NONE"),
            ("HARM_CATEGORY_HATE_SPEECH", "BLOCK_LOW_AND_ABOVE"),
            ("HARM_CATEGORY_SEXUALLY_EXPLICIT", "BLOCK_MEDIUM_AND_ABOVE"),
            ("HARM_CATEGORY_DANGEROUS_CONTENT", "BLOCK_ONLY_HIGH"),
            ("HARM_CATEGORY_CIVIC_INTEGRITY", "OFF"),
        ]
    ]
    g = generate(client, {**body(maxOutputTokens=4, temperature=0), "safetySettings": settings})
    plain = generate(client, body(maxOutputTokens=4, temperature=0))
    assert text_of(g)
    assert text_of(g) == text_of(plain)
    assert g["usageMetadata"] == plain["usageMetadata"]


@pytest.mark.parametrize(
    "settings",
    [
        [{"category": "HARM_CATEGORY_SPAM", "threshold": "BLOCK_NONE"}],
        [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_SOME"}],
        [
            {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"},
            {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF"},
        ],
        [{"category": "HARM_CATEGORY_HARASSMENT"}],
        [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF", "method": "SEVERITY"}],
    ],
    ids=["unknown-category", "unknown-threshold", "repeated-category", "missing-threshold", "unknown-field"],
)
def test_safety_settings_invalid_are_400(client: httpx.Client, settings: list):
    msg = assert_error(
        client.post(BASE + ":generateContent", json={**body(), "safetySettings": settings}), 400, "INVALID_ARGUMENT"
    )
    assert msg.startswith("safetySettings")


# -- language -------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["header", "labels"])
def test_language_selects_corpus(client: httpx.Client, how: str):
    def text(lang: str) -> str:
        req, headers = body(maxOutputTokens=40, seed=7), {}
        if how == "header":
            headers["x-llmchaos-lang"] = lang
        else:
            req["labels"] = {"lang": lang}
        chunks = sse(client, req, headers)
        return "".join(text_of(c) for c in chunks)

    zh, en = text("zh"), text("en")
    assert cjk_ratio(zh) > 0.6, zh
    assert ascii_ratio(en) > 0.95, en
    assert cjk_ratio(en) == 0, en


def test_unknown_language_is_400(client: httpx.Client):
    assert_error(
        client.post(BASE + ":generateContent", json={**body(), "labels": {"lang": "tlh"}}), 400, "INVALID_ARGUMENT"
    )
    assert_error(
        client.post(BASE + ":generateContent", json=body(), headers={"x-llmchaos-lang": "tlh"}), 400, "INVALID_ARGUMENT"
    )


# -- errors ---------------------------------------------------------------------------------------
BAD = {
    "invalid-json": b'{"contents": [',
    "non-object": ["contents"],
    "missing-contents": {"generationConfig": {"maxOutputTokens": 3}},
    "empty-contents": {"contents": []},
    "empty-parts": {"contents": [{"role": "user", "parts": []}]},
    "part-without-text": {"contents": [{"role": "user", "parts": [{}]}]},
    "part-inline-data": {"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": ""}}]}]},
    "text-not-string": {"contents": [{"parts": [{"text": 5}]}]},
    "bad-role": {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]},
    "temperature-3": body(temperature=3),
    "temperature-neg": body(temperature=-0.5),
    "topK-0": body(topK=0),
    "topP-2": body(topP=2),
    "topP-0": body(topP=0),
    "maxOutputTokens-0": body(maxOutputTokens=0),
    "maxOutputTokens-str": body(maxOutputTokens="many"),
    "stopSequences-6": body(stopSequences=["a", "b", "c", "d", "e", "f"]),
    "stopSequences-empty-string": body(stopSequences=[""]),
    "candidateCount-2": body(candidateCount=2),
    "seed-str": body(seed="x"),
    "responseMimeType-json": body(responseMimeType="application/json"),
    "unknown-field": {**body(), "cachedContent": "cachedContents/x"},
    "unknown-generationConfig-field": body(frequencyPenaltyX=1),
    "labels-not-strings": {**body(), "labels": {"lang": 1}},
}


@pytest.mark.parametrize("method", ["generateContent", "streamGenerateContent?alt=sse"])
@pytest.mark.parametrize("name", list(BAD))
def test_400_invalid_argument(client: httpx.Client, name: str, method: str):
    req = BAD[name]
    if isinstance(req, bytes):
        r = client.post(f"{BASE}:{method}", content=req, headers={"content-type": "application/json"})
    else:
        r = client.post(f"{BASE}:{method}", json=req)
    assert_error(r, 400, "INVALID_ARGUMENT")


LONE = "\ud800"  # a lone surrogate: valid JSON escape, not a Unicode scalar value (no UTF-8 for it)
HOSTILE = {
    "text": {"contents": [{"parts": [{"text": LONE}]}]},
    "second-part": {"contents": [{"parts": [{"text": "a"}, {"text": "b\udc00" + LONE}]}]},
    "system-instruction": {**body(), "systemInstruction": {"parts": [{"text": LONE}]}},
    "stop-sequence": body(stopSequences=[LONE]),
    "labels": {**body(), "labels": {"lang": LONE, LONE: "x"}},
    "model": {**body(), "model": LONE},
}
METHODS = ["generateContent", "streamGenerateContent?alt=sse", "countTokens"]


def _post_bytes(client: httpx.Client, method: str, raw: bytes) -> httpx.Response:
    return client.post(f"{BASE}:{method}", content=raw, headers={"content-type": "application/json"})


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_lone_surrogates_are_400(client: httpx.Client, name: str, method: str):
    """A lone surrogate anywhere in the body is a 400 in Gemini's shape, not a plain-text 500."""
    req = HOSTILE[name]
    if method == "countTokens":
        req = {"generateContentRequest": {"model": f"models/{MODEL}", **req}}
    assert_error(_post_bytes(client, method, json.dumps(req).encode()), 400, "INVALID_ARGUMENT")


@pytest.mark.parametrize("method", METHODS)
def test_deeply_nested_json_is_400(client: httpx.Client, method: str):
    deep = "[" * 100_000 + "]" * 100_000
    for raw in (deep, f'{{"contents": {deep}}}'):
        assert_error(_post_bytes(client, method, raw.encode()), 400, "INVALID_ARGUMENT")


def test_404_not_found(client: httpx.Client):
    msg = assert_error(client.post("/v1beta/models/gemini-9-ultra:generateContent", json=body()), 404, "NOT_FOUND")
    assert "gemini-9-ultra" in msg
    assert_error(
        client.post("/v1beta/models/gemini-9-ultra:streamGenerateContent?alt=sse", json=body()), 404, "NOT_FOUND"
    )
    msg = assert_error(client.post(BASE + ":embedContent", json=body()), 404, "NOT_FOUND")
    assert "embedContent" in msg
    assert_error(client.post(BASE, json=body()), 404, "NOT_FOUND")


def test_models_list(client: httpx.Client, engine: str):
    r = client.get("/v1beta/models")
    assert r.status_code == 200
    (m,) = r.json()["models"]
    assert m["name"] == f"models/{MODEL}"
    assert m["inputTokenLimit"] == (131072 if engine == "sim" else 8192)  # the default profile's; torch's own
    assert set(m["supportedGenerationMethods"]) == {"generateContent", "streamGenerateContent", "countTokens"}


def test_context_length_limits(guarded: Server):
    h = {"x-goog-api-key": KEY}
    long = [{"parts": [{"text": "The quick brown fox jumps over the lazy dog. " * 60}]}]
    with httpx.Client(base_url=guarded.url, timeout=30, headers=h) as c:
        msg = assert_error(c.post(BASE + ":generateContent", json={"contents": long}), 400, "INVALID_ARGUMENT")
        assert str(SMALL_LEN) in msg
        assert_error(c.post(BASE + ":generateContent", json=body(maxOutputTokens=SMALL_LEN)), 400, "INVALID_ARGUMENT")
        n = c.post(BASE + ":countTokens", json={"contents": CONTENTS}).json()["totalTokens"]
        ok = c.post(BASE + ":generateContent", json=body(maxOutputTokens=SMALL_LEN - n, temperature=0))
        assert ok.status_code == 200, ok.text
        assert_error(
            c.post(BASE + ":generateContent", json=body(maxOutputTokens=SMALL_LEN - n + 1)), 400, "INVALID_ARGUMENT"
        )


# -- request-body limit (--max-body-bytes) -------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_ten_megabyte_prompt_is_413(client: httpx.Client, method: str):
    big = json.dumps({"contents": [{"parts": [{"text": "word " * 2_000_000}]}]}).encode()
    msg = assert_error(_post_bytes(client, method, big), 413, "INVALID_ARGUMENT")
    assert "bytes" in msg


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_body_over_max_body_bytes_is_413(guarded: Server, method: str, framing: str):
    def post(size: int) -> httpx.Response:
        text = "x" * (size - len(json.dumps({"contents": [{"parts": [{"text": ""}]}]})))
        raw = json.dumps({"contents": [{"parts": [{"text": text}]}]}).encode()
        assert len(raw) == size
        content = raw if framing == "content-length" else chunked(raw)
        headers = {"content-type": "application/json", "x-goog-api-key": KEY}
        return httpx.post(f"{guarded.url}{BASE}:{method}", content=content, headers=headers, timeout=30)

    msg = assert_error(post(SMALL_BODY + 1), 413, "INVALID_ARGUMENT")
    assert str(SMALL_BODY) in msg
    r = post(SMALL_BODY)  # read and tokenized: counted, or over the small context window
    assert r.status_code == (200 if method == "countTokens" else 400), r.text


# -- auth -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["none", "wrong-header", "wrong-query", "wrong-bearer"])
def test_401_unauthenticated(guarded: Server, how: str):
    headers, params = {}, {}
    if how == "wrong-header":
        headers["x-goog-api-key"] = "nope"
    elif how == "wrong-query":
        params["key"] = "nope"
    elif how == "wrong-bearer":
        headers["authorization"] = "Bearer nope"
    with httpx.Client(base_url=guarded.url, timeout=30) as c:
        for method in ("generateContent", "streamGenerateContent?alt=sse", "countTokens"):
            r = c.post(f"{BASE}:{method}", json=body(maxOutputTokens=2), headers=headers, params=params)
            assert_error(r, 401, "UNAUTHENTICATED")


def test_models_list_needs_the_key(guarded: Server):
    """GET /v1beta/models answered without the key while /v1/models needed it."""
    url = guarded.url + "/v1beta/models"
    assert_error(httpx.get(url), 401, "UNAUTHENTICATED")
    assert_error(httpx.get(url, headers={"x-goog-api-key": "nope"}), 401, "UNAUTHENTICATED")
    right = [({"x-goog-api-key": KEY}, {}), ({}, {"key": KEY}), ({"authorization": f"Bearer {KEY}"}, {})]
    for headers, params in right:
        r = httpx.get(url, headers=headers, params=params)
        assert r.status_code == 200, r.text
        assert r.json()["models"][0]["name"] == f"models/{MODEL}"


@pytest.mark.parametrize("how", ["header", "query", "bearer"])
def test_right_key_is_accepted(guarded: Server, how: str):
    headers, params = {}, {}
    if how == "header":
        headers["x-goog-api-key"] = KEY
    elif how == "query":
        params["key"] = KEY
    else:
        headers["authorization"] = f"Bearer {KEY}"
    with httpx.Client(base_url=guarded.url, timeout=30) as c:
        r = c.post(BASE + ":generateContent", json=body(maxOutputTokens=2), headers=headers, params=params)
        assert r.status_code == 200, r.text
        assert r.json()["usageMetadata"]["candidatesTokenCount"] <= 2
        r = c.post(BASE + ":countTokens", json={"contents": CONTENTS}, headers=headers, params=params)
        assert r.status_code == 200
        assert r.json()["totalTokens"] > 0


# -- the official SDK -----------------------------------------------------------------------------
def test_sdk_generate_content_stream(server: Server, client: httpx.Client):
    sdk = sdk_client(server)
    cfg = types.GenerateContentConfig(max_output_tokens=12, temperature=0)
    chunks = list(
        sdk.models.generate_content_stream(model=MODEL, contents="Tell me something interesting.", config=cfg)
    )
    assert len(chunks) >= 2
    text = "".join(c.text or "" for c in chunks)
    last = chunks[-1]
    assert last.candidates[0].finish_reason in (types.FinishReason.MAX_TOKENS, types.FinishReason.STOP)
    u = last.usage_metadata
    assert u.total_token_count == u.prompt_token_count + u.candidates_token_count
    raw = generate(client, body(maxOutputTokens=12, temperature=0))
    assert text == text_of(raw)
    assert u.candidates_token_count == raw["usageMetadata"]["candidatesTokenCount"]


def test_sdk_generate_content_with_config(server: Server, client: httpx.Client):
    sdk = sdk_client(server)
    sys = "You are a very helpful assistant."
    raw_req = {
        "contents": CONTENTS,
        "systemInstruction": {"parts": [{"text": sys}]},
        "generationConfig": {"maxOutputTokens": 40, "temperature": 0},
    }
    full = text_of(generate(client, raw_req))
    cfg = types.GenerateContentConfig(max_output_tokens=40, temperature=0, system_instruction=sys)
    r = sdk.models.generate_content(model=MODEL, contents="Tell me something interesting.", config=cfg)
    assert r.text == full
    assert r.usage_metadata.prompt_token_count == generate(client, raw_req)["usageMetadata"]["promptTokenCount"]
    stop = pick_stop(full)
    cfg = types.GenerateContentConfig(
        max_output_tokens=40, temperature=0, system_instruction=sys, stop_sequences=[stop]
    )
    r = sdk.models.generate_content(model=MODEL, contents="Tell me something interesting.", config=cfg)
    assert r.text == full[: full.index(stop)]
    assert r.candidates[0].finish_reason == types.FinishReason.STOP
    assert r.usage_metadata.candidates_token_count < 40


def test_sdk_count_tokens(server: Server, client: httpx.Client):
    sdk = sdk_client(server)
    n = sdk.models.count_tokens(model=MODEL, contents="Tell me something interesting.").total_tokens
    assert n == count_tokens(client, {"contents": CONTENTS})
    assert n == generate(client, body(maxOutputTokens=1))["usageMetadata"]["promptTokenCount"]


def test_sdk_wrong_key(guarded: Server):
    wrong = sdk_client(guarded, "nope")
    with pytest.raises(genai_errors.ClientError) as e:
        wrong.models.generate_content(model=MODEL, contents="hi")
    assert e.value.code == 401
    assert e.value.status == "UNAUTHENTICATED"
    right = sdk_client(guarded, KEY)
    r = right.models.generate_content(
        model=MODEL, contents="hi", config=types.GenerateContentConfig(max_output_tokens=3)
    )
    assert r.usage_metadata.candidates_token_count <= 3


# -- lifecycle: 503 while starting, then 429 when the waiting queue is full ------------------------
def test_503_unavailable_while_starting_then_200(slow: Server):
    assert httpx.get(slow.url + "/healthz").status_code == 503
    for method in ("generateContent", "streamGenerateContent?alt=sse"):
        r = httpx.post(f"{slow.url}{BASE}:{method}", json=body(maxOutputTokens=2))
        assert "starting" in assert_error(r, 503, "UNAVAILABLE")
        assert int(r.headers["retry-after"]) >= 1
    wait_ready(slow)
    r = httpx.post(f"{slow.url}{BASE}:generateContent", json=body(maxOutputTokens=2), timeout=30)
    assert r.status_code == 200, r.text


def test_429_resource_exhausted(slow: Server):
    wait_ready(slow)
    results = burst(7, f"{slow.url}{BASE}:streamGenerateContent?alt=sse", body(maxOutputTokens=400, temperature=0))
    statuses = sorted(r[0] for r in results)
    assert set(statuses) == {200, 429}, results
    assert 2 <= statuses.count(200) <= 3, statuses
    for status, headers, raw in results:
        if status == 429:
            assert headers["retry-after"].isdigit()
            assert int(headers["retry-after"]) > 0
            err = json.loads(raw)["error"]
            assert err["code"] == 429
            assert err["status"] == "RESOURCE_EXHAUSTED"
            assert err["message"]
