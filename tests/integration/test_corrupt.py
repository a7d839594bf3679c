"""The fault `corrupt` end to end: a real `llmchaos serve` (sim and torch) with its admin API on, driven
by a real `llmchaos faults run` of a schedule with a `corrupt` window. The same greedy request answers
its text T before, punctuation-only garbage G (the same G each time, as many tokens as T) while the
window is on, and T again once it is reverted: over OpenAI chat streaming and Gemini streaming."""

from __future__ import annotations

import json
import os
import signal
import string
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from llmchaos.sse_codec import Decoder
from tests.integration.conftest import engine_args
from tests.procs import ROOT, Server, serve, stop, wait_for

TOKEN = "corrupt-secret"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
MODEL = "llmchaos-sim-8b"
PROMPT = "Tell me about database indexes."
MAX_TOKENS = 24
URL = "/admin/faults/corrupt"


@pytest.fixture(scope="module")
def target(engine: str) -> Iterator[Server]:
    with serve(*engine_args(engine, "--sim-time-scale", "0.1", "--admin-token", TOKEN)) as s:
        yield s


def events(client: httpx.Client, path: str, body: dict) -> list[dict]:
    """A streaming POST's SSE events as JSON (OpenAI's [DONE] left out); the stream must end cleanly."""
    dec, out = Decoder(), []
    with client.stream("POST", path, json=body) as r:
        assert r.status_code == 200, r.read()
        for chunk in r.iter_raw():
            out.extend(dec.feed(chunk))
    assert not dec.pending()
    return [json.loads(e.data) for e in out if e.data != "[DONE]"]


def chat(client: httpx.Client) -> tuple[str, int]:
    """(the text, thinking and answer, completion_tokens) of a greedy seeded OpenAI chat stream."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "seed": 7,
    }
    chunks = events(client, "/v1/chat/completions", body)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    text = "".join((d.get("reasoning_content") or "") + (d.get("content") or "") for d in deltas)
    return text, chunks[-1]["usage"]["completion_tokens"]


def gemini(client: httpx.Client) -> tuple[str, int]:
    """(the text, thoughts and answer, output tokens) of a greedy seeded Gemini stream."""
    body = {
        "contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
        "generationConfig": {"temperature": 0, "seed": 7, "maxOutputTokens": MAX_TOKENS},
    }
    chunks = events(client, f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse", body)
    text = "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"])
    usage = chunks[-1]["usageMetadata"]
    return text, usage["candidatesTokenCount"] + usage.get("thoughtsTokenCount", 0)


def corrupt(url: str) -> bool:
    state = httpx.get(url + URL, headers=ADMIN).json()
    assert set(state) == {"corrupt"}
    return state["corrupt"]


def run_window(tmp_path: Path, url: str) -> subprocess.Popen:
    """`llmchaos faults run` of one long corrupt window from 0s, applied once this returns."""
    path = tmp_path / "corrupt.yaml"
    path.write_text(
        "seed: 1\nfaults:\n  - name: garbage\n    kind: corrupt\n"
        f'    target: {{sim: "{url}", token_env: CORRUPT_TOKEN}}\n    at: 0s\n    duration: 10m\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmchaos.cli", "faults", "run", str(path), "--journal", str(tmp_path / "j.json")],
        cwd=ROOT,
        env={**os.environ, "CORRUPT_TOKEN": TOKEN},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: corrupt(url), proc, "the corrupt window never applied")
    except BaseException:
        stop(proc)
        raise
    return proc


@pytest.mark.parametrize("api", [chat, gemini], ids=["openai-chat", "gemini"])
def test_a_corrupt_window_answers_the_same_garbage_with_as_many_tokens_then_the_answer_again(
    tmp_path: Path, target: Server, api: Callable[[httpx.Client], tuple[str, int]]
) -> None:
    with httpx.Client(base_url=target.url, timeout=120) as client:
        assert not corrupt(target.url)
        text, tokens = api(client)
        assert text.strip()
        assert api(client) == (text, tokens)  # greedy and seeded: T every time
        proc = run_window(tmp_path, target.url)
        try:
            garbage, bad_tokens = api(client)
            again = api(client)
        finally:
            proc.send_signal(signal.SIGTERM)  # the runner reverts what it applied, then ends
            try:
                out, err = proc.communicate(timeout=30)
            finally:
                stop(proc)  # by its PID, had it not ended
        assert proc.returncode == 0, out + err
        assert json.loads((tmp_path / "j.json").read_text()) == []  # reverted, and journalled so
        assert not corrupt(target.url)
        assert garbage != text
        assert bad_tokens == tokens
        assert garbage
        assert set(garbage) <= set(string.punctuation), garbage
        assert again == (garbage, bad_tokens)  # deterministic
        assert api(client) == (text, tokens)  # reverted: T again


def test_the_admin_api_refuses_without_its_token(target: Server) -> None:
    url = target.url + URL
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}):
        for method in ("GET", "PUT", "DELETE"):
            r = httpx.request(method, url, headers=headers)
            assert r.status_code == 401, (method, headers, r.text)
            assert r.json()["error"]["code"] == "invalid_api_key"
    assert not corrupt(target.url)  # nothing refused took effect
    assert httpx.put(url, headers=ADMIN, json={"corrupt": True}).status_code == 400  # PUT takes no fields
    assert not corrupt(target.url)
