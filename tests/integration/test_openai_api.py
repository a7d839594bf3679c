"""The reference server's OpenAI-compatible API, driven over real HTTP on loopback.

Four server processes in all (module-scoped): the main one, one with `--api-key` and a small
`--max-model-len`, one that starts slowly and admits one request at a time (503 while starting,
then 429 when its waiting queue is full), and one drained with SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

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
from tests.procs import Server, serve

MODEL = "llmchaos-sim-8b"
KEY = "sk-test-key"
MSGS = [{"role": "user", "content": "Tell me something interesting."}]


# -- helpers ------------------------------------------------------------------------------------
def chat_body(**kw) -> dict:
    return {"model": MODEL, "messages": MSGS, **kw}


def comp_body(**kw) -> dict:
    return {"model": MODEL, "prompt": "Once upon a time", **kw}


def stream(client: httpx.Client, path: str, body: dict, headers: dict | None = None) -> list[str]:
    """POST a streaming request; every SSE event's data, in order (the stream must end cleanly)."""
    dec, data = Decoder(), []
    with client.stream("POST", path, json=body, headers=headers) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for chunk in r.iter_raw():
            data.extend(e.data for e in dec.feed(chunk))
    assert not dec.pending(), "stream ended inside an event"
    return data


def chunks_of(data: list[str]) -> list[dict]:
    assert data[-1] == "[DONE]", data[-3:]
    assert "[DONE]" not in data[:-1]
    return [json.loads(d) for d in data[:-1]]


def assert_error(r: httpx.Response, status: int, typ: str, code: str | None = None) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str)
    assert err["message"]
    assert err["type"] == typ, err
    assert err["code"] == code, err
    return err


# -- servers ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def guarded_client(guarded: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=guarded.url, timeout=60, headers={"authorization": f"Bearer {KEY}"}) as c:
        yield c


# -- models ---------------------------------------------------------------------------------------
def test_models_list_shape(client: httpx.Client, engine: str):
    r = client.get("/v1/models")
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "list"
    assert len(body["data"]) == 1
    m = body["data"][0]
    assert m["id"] == MODEL
    assert m["object"] == "model"
    assert m["root"] == MODEL
    assert isinstance(m["created"], int)
    assert isinstance(m["owned_by"], str)
    assert m["max_model_len"] == (131072 if engine == "sim" else 8192)  # the default profile's; torch's own


# -- chat -----------------------------------------------------------------------------------------
def test_chat_non_stream_shape(client: httpx.Client):
    r = client.post("/v1/chat/completions", json=chat_body(max_tokens=12, ignore_eos=True))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["model"] == MODEL
    assert isinstance(body["created"], int)
    (choice,) = body["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "length"
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["message"]["content"].strip()
    u = body["usage"]
    assert u["completion_tokens"] == 12
    assert u["prompt_tokens"] > tokenizer.count(MSGS[0]["content"])  # the chat template adds tokens
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]


@pytest.mark.parametrize("include_usage", [True, False])
def test_chat_stream_vllm_chunks(client: httpx.Client, include_usage: bool):
    body = chat_body(max_tokens=20, ignore_eos=True, temperature=0, stream=True)
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    chunks = chunks_of(stream(client, "/v1/chat/completions", body))
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["id"].startswith("chatcmpl-")
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == MODEL for c in chunks)
    if include_usage:
        *chunks, last = chunks
        assert last["choices"] == []
        assert last["usage"]["completion_tokens"] == 20  # ignore_eos: exactly max_tokens
        assert last["usage"]["total_tokens"] == last["usage"]["prompt_tokens"] + 20
    assert all("usage" not in c for c in chunks)  # vLLM's chat chunks leave it out, OpenAI's write null
    assert all(c["choices"] for c in chunks)
    first, *rest = chunks
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert first["choices"][0]["finish_reason"] is None
    assert rest, "no content chunks"
    for c in rest:
        (ch,) = c["choices"]
        assert set(ch["delta"]) == {"content"}
    assert [c["choices"][0]["finish_reason"] for c in rest] == [None] * (len(rest) - 1) + ["length"]
    assert len(rest) <= 20
    assert rest[-1]["choices"][0]["stop_reason"] is None  # no stop string ended it
    text = "".join(c["choices"][0]["delta"]["content"] for c in rest)
    # the same request without streaming gives the same text (temperature 0)
    plain = client.post("/v1/chat/completions", json=chat_body(max_tokens=20, ignore_eos=True, temperature=0))
    assert plain.json()["choices"][0]["message"]["content"] == text


def test_chat_stream_natural_stop(client: httpx.Client):
    """Seed 1 reaches the end of a paragraph (EOS) well before max_tokens."""
    body = chat_body(max_tokens=300, seed=1, stream=True, stream_options={"include_usage": True})
    chunks = chunks_of(stream(client, "/v1/chat/completions", body))
    usage = chunks[-1]["usage"]
    reasons = [c["choices"][0]["finish_reason"] for c in chunks[:-1]]
    assert reasons[-1] == "stop"
    assert set(reasons[:-1]) == {None}
    assert 0 < usage["completion_tokens"] < 300
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    plain = client.post("/v1/chat/completions", json=chat_body(max_tokens=300, seed=1)).json()
    assert plain["choices"][0]["finish_reason"] == "stop"
    assert plain["choices"][0]["message"]["content"] == text
    assert plain["usage"]["completion_tokens"] == usage["completion_tokens"]


def test_chat_max_tokens_and_max_completion_tokens(client: httpx.Client):
    for field in ("max_tokens", "max_completion_tokens"):
        r = client.post("/v1/chat/completions", json=chat_body(**{field: 7}, temperature=0)).json()
        assert r["usage"]["completion_tokens"] <= 7
        if r["choices"][0]["finish_reason"] == "length":
            assert r["usage"]["completion_tokens"] == 7
    r = client.post("/v1/chat/completions", json=chat_body(max_tokens=9, min_tokens=9, seed=1)).json()
    assert r["usage"]["completion_tokens"] == 9
    assert r["choices"][0]["finish_reason"] == "length"


# -- completions ----------------------------------------------------------------------------------
def test_completions_prompt_forms_agree(client: httpx.Client):
    """A string, a one-string list and its token ids are the same prompt: same usage, same text."""
    text = "The history of the internet"
    ids = tokenizer.encode(text)
    out = []
    for prompt in (text, [text], ids):
        r = client.post("/v1/completions", json=comp_body(prompt=prompt, max_tokens=10, temperature=0))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["object"] == "text_completion"
        assert body["id"].startswith("cmpl-")
        (choice,) = body["choices"]
        assert choice["index"] == 0
        assert isinstance(choice["text"], str)
        assert body["usage"]["prompt_tokens"] == len(ids)
        assert body["usage"]["completion_tokens"] <= 10
        out.append((choice["text"], choice["finish_reason"], body["usage"]))
    assert out[0] == out[1] == out[2]
    assert out[0][0]


def test_completions_default_max_tokens_is_16(client: httpx.Client):
    r = client.post("/v1/completions", json=comp_body(ignore_eos=True)).json()
    assert r["usage"]["completion_tokens"] == 16
    assert r["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("include_usage", [True, False])
def test_completions_stream_chunks(client: httpx.Client, include_usage: bool):
    body = comp_body(max_tokens=15, ignore_eos=True, temperature=0, stream=True)
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    chunks = chunks_of(stream(client, "/v1/completions", body))
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["id"].startswith("cmpl-")
    assert all(c["object"] == "text_completion" for c in chunks)
    if include_usage:
        *chunks, last = chunks
        assert last["choices"] == []
        assert last["usage"]["completion_tokens"] == 15
    assert all(c["usage"] is None for c in chunks)  # a completion's chunks write every field
    first, *rest = [c["choices"][0]["prompt_token_ids"] for c in chunks]
    assert all(ids is None for ids in rest)  # vLLM 0.11: the prompt's ids in the first chunk only
    reasons = [c["choices"][0]["finish_reason"] for c in chunks]
    assert reasons == [None] * (len(chunks) - 1) + ["length"]
    text = "".join(c["choices"][0]["text"] for c in chunks)
    plain = client.post("/v1/completions", json=comp_body(max_tokens=15, ignore_eos=True, temperature=0))
    assert plain.json()["choices"][0]["text"] == text
    assert len(first) == plain.json()["usage"]["prompt_tokens"]


# -- language -------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["header", "metadata"])
def test_language_selects_corpus(client: httpx.Client, how: str):
    def text(lang: str, path: str) -> str:
        body = (
            chat_body(max_tokens=40, ignore_eos=True)
            if path.endswith("chat/completions")
            else comp_body(max_tokens=40, ignore_eos=True)
        )
        headers = {}
        if how == "header":
            headers["x-llmchaos-lang"] = lang
        else:
            body["metadata"] = {"lang": lang}
        r = client.post(path, json=body, headers=headers)
        assert r.status_code == 200, r.text
        c = r.json()["choices"][0]
        return c["message"]["content"] if "message" in c else c["text"]

    for path in ("/v1/chat/completions", "/v1/completions"):
        zh, en = text("zh", path), text("en", path)
        assert cjk_ratio(zh) > 0.6, zh
        assert ascii_ratio(en) > 0.95, en
        assert cjk_ratio(en) == 0, en


def test_language_header_wins_over_metadata(client: httpx.Client):
    r = client.post(
        "/v1/chat/completions",
        headers={"x-llmchaos-lang": "zh"},
        json=chat_body(max_tokens=30, ignore_eos=True, metadata={"lang": "en"}),
    )
    assert cjk_ratio(r.json()["choices"][0]["message"]["content"]) > 0.6


# -- sampling -------------------------------------------------------------------------------------
def _content(client: httpx.Client, **kw) -> str:
    r = client.post("/v1/chat/completions", json=chat_body(max_tokens=40, ignore_eos=True, **kw))
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def test_temperature_zero_is_deterministic(client: httpx.Client):
    a, b = _content(client, temperature=0), _content(client, temperature=0)
    assert a
    assert a == b


def test_seed_reproduces_and_different_seeds_differ(client: httpx.Client):
    a, b = _content(client, temperature=1, seed=11), _content(client, temperature=1, seed=11)
    c = _content(client, temperature=1, seed=12)
    assert a == b
    assert c != a


def test_top_k_one_and_tiny_top_p_ignore_the_seed(client: httpx.Client):
    """top_k=1 (or a tiny top_p) leaves one candidate per step, so the seed no longer matters."""
    a = _content(client, temperature=1, top_k=1, seed=21)
    b = _content(client, temperature=1, top_k=1, seed=22)
    c = _content(client, temperature=1, top_p=1e-6, seed=23)
    assert a
    assert a == b == c


def test_tiny_temperature_fails_no_other_stream(server: Server):
    """Twenty streams at once, one at temperature 0.001: every one of them ends with [DONE] and its tokens
    (the sampler overflowed, and the engine failed the whole batch with it)."""

    async def one(c: httpx.AsyncClient, temperature: float) -> list[str]:
        body = comp_body(max_tokens=12, ignore_eos=True, stream=True, temperature=temperature)
        dec, data = Decoder(), []
        async with c.stream("POST", "/v1/completions", json=body) as r:
            assert r.status_code == 200, await r.aread()
            async for chunk in r.aiter_raw():
                data.extend(e.data for e in dec.feed(chunk))
        return data

    async def go() -> list[list[str]]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
            return await asyncio.gather(*(one(c, 0.001 if i == 7 else 1.0) for i in range(20)))

    for data in asyncio.run(go()):
        chunks = chunks_of(data)
        assert all("error" not in c for c in chunks), chunks
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"


# -- stop sequences -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_stop_sequence_truncates(client: httpx.Client, path: str):
    chat = path.endswith("chat/completions")
    mk = chat_body if chat else comp_body
    full = client.post(path, json=mk(max_tokens=50, ignore_eos=True, temperature=0)).json()
    full_text = full["choices"][0]["message"]["content"] if chat else full["choices"][0]["text"]
    stop = pick_stop(full_text)
    prefix = full_text[: full_text.index(stop)]
    assert prefix

    r = client.post(path, json=mk(max_tokens=50, ignore_eos=True, temperature=0, stop=[stop])).json()
    c = r["choices"][0]
    assert (c["message"]["content"] if chat else c["text"]) == prefix
    assert c["finish_reason"] == "stop"
    assert r["usage"]["completion_tokens"] < 50

    body = mk(max_tokens=50, ignore_eos=True, temperature=0, stop=stop, stream=True)  # a bare string too
    chunks = chunks_of(stream(client, path, body))
    key = (lambda ch: ch["delta"].get("content", "")) if chat else (lambda ch: ch["text"])
    assert "".join(key(ch["choices"][0]) for ch in chunks) == prefix
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"][0]["stop_reason"] == stop  # vLLM's: the stop string that ended it
    assert c["stop_reason"] == stop
    assert all(stop not in key(ch["choices"][0]) for ch in chunks)


# -- errors ---------------------------------------------------------------------------------------
def case(name: str, body, param: str | None):
    return pytest.param(body, param, id=name)


U = MSGS
CHAT_400 = [
    case("invalid-json", b'{"model": "llmchaos-sim-8b", "messages": [', None),
    case("non-object", [1, 2], None),
    case("missing-model", {"messages": U}, "model"),
    case("missing-messages", {"model": MODEL}, "messages"),
    case("empty-messages", {"model": MODEL, "messages": []}, "messages"),
    case("bad-role", {"model": MODEL, "messages": [{"role": "robot", "content": "hi"}]}, "messages.0.role"),
    case("content-int", {"model": MODEL, "messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
    case(
        "content-part-type",
        {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url", "text": "x"}]}]},
        "messages.0.content.0.type",
    ),
    case("temperature-neg", chat_body(temperature=-1), "temperature"),
    case("temperature-3", chat_body(temperature=3), "temperature"),
    case("temperature-str", chat_body(temperature="hot"), "temperature"),
    case("top_p-0", chat_body(top_p=0), "top_p"),
    case("top_p-1.5", chat_body(top_p=1.5), "top_p"),
    case("top_k--2", chat_body(top_k=-2), "top_k"),
    case("n-2", chat_body(n=2), "n"),
    case("max_tokens-0", chat_body(max_tokens=0), "max_tokens"),
    case("max_tokens-x", chat_body(max_tokens="x"), "max_tokens"),
    case("max_completion_tokens-0", chat_body(max_completion_tokens=0), "max_completion_tokens"),
    case("stop-5", chat_body(stop=["a", "b", "c", "d", "e"]), "stop"),
    case("stream_options-without-stream", chat_body(stream_options={"include_usage": True}), "stream_options"),
    case("stream_options-unknown", chat_body(stream=True, stream_options={"x": 1}), "stream_options.x"),
    case("unknown-field", chat_body(frobnicate=True), "frobnicate"),
    case("min_tokens-over-max", chat_body(max_tokens=5, min_tokens=6), "min_tokens"),
    case("min_tokens-neg", chat_body(min_tokens=-1), "min_tokens"),
    case("seed-x", chat_body(seed="x"), "seed"),
    case("metadata-lang-unknown", chat_body(metadata={"lang": "klingon"}), "metadata.lang"),
    case("stream-not-bool", chat_body(stream="maybe"), "stream"),
]


def _post_raw(client: httpx.Client, path: str, body, headers: dict | None = None) -> httpx.Response:
    if isinstance(body, bytes):
        return client.post(path, content=body, headers={"content-type": "application/json", **(headers or {})})
    return client.post(path, json=body, headers=headers)


@pytest.mark.parametrize(("body", "param"), CHAT_400)
def test_chat_400_for_bad_input(client: httpx.Client, body, param: str | None):
    r = _post_raw(client, "/v1/chat/completions", body)
    err = assert_error(r, 400, "invalid_request_error")
    assert err["param"] == param, err


COMP_400 = [
    case("missing-prompt", {"model": MODEL}, "prompt"),
    case("empty-string", comp_body(prompt=""), "prompt"),
    case("empty-list", comp_body(prompt=[]), "prompt"),
    case("two-strings", comp_body(prompt=["a", "b"]), "prompt"),
    case("token-id-negative", comp_body(prompt=[-1]), "prompt"),
    case("token-id-out-of-vocab", comp_body(prompt=[10**9]), "prompt"),
    case("max_tokens-0", comp_body(max_tokens=0), "max_tokens"),
    case("temperature-3", comp_body(temperature=3), "temperature"),
    case("n-2", comp_body(n=2), "n"),
    case("unknown-field", comp_body(suffix="x"), "suffix"),
    case("min_tokens-over-max", comp_body(max_tokens=3, min_tokens=4), "min_tokens"),
    case("metadata-lang-unknown", comp_body(metadata={"lang": "xx"}), "metadata.lang"),
]


@pytest.mark.parametrize(("body", "param"), COMP_400)
def test_completions_400_for_bad_input(client: httpx.Client, body, param: str | None):
    r = _post_raw(client, "/v1/completions", body)
    err = assert_error(r, 400, "invalid_request_error")
    assert err["param"] == param, err


LONE = "\ud800"  # a lone surrogate: valid JSON escape, not a Unicode scalar value (no UTF-8 for it)
HOSTILE = [
    ("/v1/chat/completions", chat_body(model=LONE)),
    ("/v1/chat/completions", chat_body(messages=[{"role": "user", "content": LONE}])),
    ("/v1/chat/completions", chat_body(messages=[{"role": "user", "content": [{"type": "text", "text": "a" + LONE}]}])),
    ("/v1/chat/completions", chat_body(messages=[{"role": "user", "content": "x", "name": LONE}])),
    ("/v1/chat/completions", chat_body(stop=[LONE], user=LONE, metadata={"lang": LONE})),
    ("/v1/completions", comp_body(model=LONE)),
    ("/v1/completions", comp_body(prompt=LONE)),
    ("/v1/completions", comp_body(prompt=["\udc00" + LONE + "x"], stream=True)),
    ("/v1/completions", comp_body(stop=LONE)),
]


@pytest.mark.parametrize(("path", "body"), HOSTILE)
def test_lone_surrogates_are_400(client: httpx.Client, path: str, body: dict):
    """A lone surrogate anywhere in the body is a 400 in OpenAI's shape, not a plain-text 500."""
    assert_error(_post_raw(client, path, json.dumps(body).encode()), 400, "invalid_request_error")


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("where", ["top", "field"])
def test_deeply_nested_json_is_400(client: httpx.Client, path: str, where: str):
    deep = "[" * 100_000 + "]" * 100_000
    raw = deep if where == "top" else f'{{"model": "{MODEL}", "prompt": {deep}, "messages": {deep}}}'
    assert_error(_post_raw(client, path, raw.encode()), 400, "invalid_request_error")


@pytest.mark.parametrize(
    ("path", "body"), [("/v1/chat/completions", chat_body(max_tokens=3)), ("/v1/completions", comp_body(max_tokens=3))]
)
def test_unknown_lang_header_is_400(client: httpx.Client, path: str, body: dict):
    err = assert_error(client.post(path, json=body, headers={"x-llmchaos-lang": "tlh"}), 400, "invalid_request_error")
    assert err["param"] == "x-llmchaos-lang"
    assert "tlh" in err["message"]


@pytest.mark.parametrize(("path", "body"), [("/v1/chat/completions", chat_body()), ("/v1/completions", comp_body())])
def test_unknown_model_is_404(client: httpx.Client, path: str, body: dict):
    err = assert_error(
        client.post(path, json={**body, "model": "gpt-17"}), 404, "invalid_request_error", "model_not_found"
    )
    assert err["param"] == "model"
    assert "gpt-17" in err["message"]


# -- request-body limit (--max-body-bytes) -------------------------------------------------------
def test_ten_megabyte_prompt_is_413(client: httpx.Client):
    """Refused by its size before anything parses or tokenizes it (it took 5 s of the event loop)."""
    big = json.dumps(comp_body(prompt="word " * 2_000_000)).encode()
    err = assert_error(_post_raw(client, "/v1/completions", big), 413, "invalid_request_error")
    assert "bytes" in err["message"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_body_over_max_body_bytes_is_413(guarded_client: httpx.Client, path: str, framing: str):
    def post(size: int) -> httpx.Response:
        text = "x" * (size - len(json.dumps(chat_body(prompt="", messages=[{"role": "user", "content": ""}]))))
        raw = json.dumps(chat_body(prompt=text, messages=[{"role": "user", "content": ""}])).encode()
        assert len(raw) == size
        content = raw if framing == "content-length" else chunked(raw)
        return guarded_client.post(path, content=content, headers={"content-type": "application/json"})

    err = assert_error(post(SMALL_BODY + 1), 413, "invalid_request_error")
    assert str(SMALL_BODY) in err["message"]
    assert post(SMALL_BODY).status_code == 400  # read and parsed: an unknown field for one API or the other


# -- context length (small --max-model-len) -----------------------------------------------------
def _ids(n: int) -> list[int]:
    ids = tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 100)
    assert len(ids) >= n
    return ids[:n]


def test_context_length_limits(guarded_client: httpx.Client):
    c = guarded_client
    long_text = "The quick brown fox jumps over the lazy dog. " * 60  # > 256 tokens
    assert tokenizer.count(long_text) > SMALL_LEN
    err = assert_error(
        c.post("/v1/chat/completions", json=chat_body(messages=[{"role": "user", "content": long_text}])),
        400,
        "invalid_request_error",
    )
    assert err["param"] == "messages"
    assert str(SMALL_LEN) in err["message"]
    err = assert_error(c.post("/v1/completions", json=comp_body(prompt=long_text)), 400, "invalid_request_error")
    assert err["param"] == "prompt"
    err = assert_error(c.post("/v1/completions", json=comp_body(prompt=_ids(SMALL_LEN))), 400, "invalid_request_error")
    assert err["param"] == "prompt"
    # prompt + max_tokens: exactly the window is fine, one more token is not
    r = c.post("/v1/completions", json=comp_body(prompt=_ids(250), max_tokens=6, ignore_eos=True))
    assert r.status_code == 200, r.text
    assert r.json()["usage"] == {"prompt_tokens": 250, "completion_tokens": 6, "total_tokens": 256}
    err = assert_error(
        c.post("/v1/completions", json=comp_body(prompt=_ids(250), max_tokens=7)), 400, "invalid_request_error"
    )
    assert err["param"] == "max_tokens"
    assert "257" in err["message"]
    err = assert_error(
        c.post("/v1/completions", json=comp_body(prompt=_ids(250))),
        400,  # default 16
        "invalid_request_error",
    )
    assert err["param"] == "max_tokens"
    err = assert_error(
        c.post("/v1/chat/completions", json=chat_body(max_tokens=SMALL_LEN)), 400, "invalid_request_error"
    )
    assert err["param"] == "max_tokens"
    err = assert_error(
        c.post("/v1/chat/completions", json=chat_body(max_completion_tokens=SMALL_LEN)), 400, "invalid_request_error"
    )
    assert err["param"] == "max_completion_tokens"


# -- auth -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer nope"}, {"authorization": KEY}, {"authorization": f"Basic {KEY}"}],
    ids=["missing", "wrong", "no-scheme", "basic"],
)
def test_401_without_the_right_key(guarded: Server, headers: dict):
    with httpx.Client(base_url=guarded.url, timeout=30) as c:
        for path, body in (
            ("/v1/chat/completions", chat_body(max_tokens=2)),
            ("/v1/completions", comp_body(max_tokens=2)),
        ):
            assert_error(c.post(path, json=body, headers=headers), 401, "invalid_request_error", "invalid_api_key")
        assert_error(c.get("/v1/models", headers=headers), 401, "invalid_request_error", "invalid_api_key")


def test_200_with_the_right_key(guarded_client: httpx.Client):
    assert guarded_client.get("/v1/models").status_code == 200
    r = guarded_client.post("/v1/chat/completions", json=chat_body(max_tokens=3, ignore_eos=True))
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] == 3
    r = guarded_client.post("/v1/completions", json=comp_body(max_tokens=3, ignore_eos=True))
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] == 3


# -- the official SDK -----------------------------------------------------------------------------
def test_sdk_chat_stream_with_usage(server: Server):
    sdk = openai.OpenAI(base_url=server.url + "/v1", api_key="anything", max_retries=0)
    chunks = list(
        sdk.chat.completions.create(
            model=MODEL,
            messages=MSGS,
            max_tokens=10,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 10
    assert all(c.usage is None for c in chunks[:-1])
    plain = sdk.chat.completions.create(
        model=MODEL, messages=MSGS, max_tokens=10, temperature=0, extra_body={"ignore_eos": True}
    )
    assert plain.choices[0].message.content == text


def test_sdk_completions_and_models(server: Server):
    sdk = openai.OpenAI(base_url=server.url + "/v1", api_key="anything", max_retries=0)
    assert [m.id for m in sdk.models.list()] == [MODEL]
    c = sdk.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=8, temperature=0, extra_body={"ignore_eos": True}
    )
    assert c.object == "text_completion"
    assert c.choices[0].finish_reason == "length"
    assert c.usage.completion_tokens == 8
    assert c.choices[0].text
    with pytest.raises(openai.NotFoundError):
        sdk.completions.create(model="nope", prompt="x", max_tokens=2)
    with pytest.raises(openai.BadRequestError):
        sdk.completions.create(model=MODEL, prompt="x", max_tokens=2, temperature=5)


def test_sdk_api_key(guarded: Server):
    wrong = openai.OpenAI(base_url=guarded.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        wrong.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=2)
    assert e.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    right = openai.OpenAI(base_url=guarded.url + "/v1", api_key=KEY, max_retries=0)
    r = right.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=2)
    assert r.usage.completion_tokens <= 2


# -- lifecycle: 503 while starting, then 429 when the waiting queue is full ------------------------
def test_503_while_starting_then_200(slow: Server):
    h = httpx.get(slow.url + "/healthz")
    assert h.status_code == 503
    assert h.json()["status"] == "starting"
    r = httpx.post(slow.url + "/v1/chat/completions", json=chat_body(max_tokens=2))
    err = assert_error(r, 503, "server_error", "service_unavailable")
    assert "starting" in err["message"]
    assert int(r.headers["retry-after"]) >= 1
    wait_ready(slow)
    r = httpx.post(slow.url + "/v1/chat/completions", json=chat_body(max_tokens=2), timeout=30)
    assert r.status_code == 200, r.text


def test_429_when_waiting_queue_full(slow: Server):
    wait_ready(slow)
    results = burst(7, slow.url + "/v1/chat/completions", chat_body(max_tokens=400, ignore_eos=True, stream=True))
    statuses = sorted(r[0] for r in results)
    # one running + two waiting at most are admitted; the rest are refused
    assert set(statuses) == {200, 429}, statuses
    assert 2 <= statuses.count(200) <= 3, statuses
    assert statuses.count(429) >= 4, statuses
    for status, headers, body in results:
        if status == 429:
            assert headers["retry-after"].isdigit()
            assert int(headers["retry-after"]) > 0
            err = json.loads(body)["error"]
            assert err["type"] == "rate_limit_error"
            assert err["code"] == "rate_limit_exceeded"
            assert set(err) == {"message", "type", "param", "code"}


# -- drain on SIGTERM -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def drained() -> Iterator[dict]:
    """Start a long stream, SIGTERM the server, probe it with a new connection, finish the stream."""
    out: dict = {}
    with serve("--sim-time-scale", "1") as s:
        dec, data = Decoder(), []
        with (
            httpx.Client(timeout=30) as c,
            c.stream(
                "POST",
                s.url + "/v1/chat/completions",
                json=chat_body(max_tokens=200, ignore_eos=True, stream=True, stream_options={"include_usage": True}),
            ) as r,
        ):
            raw = r.iter_raw()
            while len(data) < 3:  # the role chunk and some content: the request is running
                data.extend(e.data for e in dec.feed(next(raw)))
            s.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 10
            while True:  # the signal is handled asynchronously; wait until the server says so
                h = httpx.get(s.url + "/healthz", timeout=5)
                if h.status_code == 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            out["healthz"] = (h.status_code, h.json())
            new = httpx.post(s.url + "/v1/chat/completions", json=chat_body(max_tokens=2), timeout=10)
            out["new"] = (new.status_code, new.json(), new.headers.get("retry-after"))
            for chunk in raw:
                data.extend(e.data for e in dec.feed(chunk))
        out["data"] = data
        try:
            out["returncode"] = s.proc.wait(20)
        except Exception:  # noqa: BLE001 - reported by the test
            out["returncode"] = None
        yield out


def test_drain_refuses_new_requests_and_finishes_running(drained: dict):
    status, health = drained["healthz"]
    assert status == 503
    assert health["status"] == "draining"
    status, body, retry_after = drained["new"]
    assert status == 503, body
    assert body["error"]["type"] == "server_error"
    assert body["error"]["code"] == "service_unavailable"
    assert "draining" in body["error"]["message"]
    assert retry_after == "1"
    chunks = chunks_of(drained["data"])
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 200
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert drained["returncode"] is not None, "server did not exit after draining"


def test_drain_exits_zero(drained: dict):
    assert drained["returncode"] == 0
