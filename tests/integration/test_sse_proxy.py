"""The SSE chaos proxy in front of the real reference server: each misbehaviour, and a clean revert."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from llmchaos.sse_codec import Decoder
from tests.procs import ROOT, free_port, serve, stop

FAULT = "/_llmchaos/fault"


@contextlib.contextmanager
def proxy_process(upstream: str, *extra: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`llmchaos proxy` in front of `upstream` on a free loopback port (plus `extra` flags): (its URL,
    its process)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llmchaos.cli",
            "proxy",
            "--listen",
            f"127.0.0.1:{port}",
            "--upstream",
            upstream,
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"the proxy exited with {proc.returncode}"
            assert time.monotonic() < deadline, "the proxy did not answer in 30 s"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + FAULT).status_code == 200:
                    break
            time.sleep(0.05)
        yield url, proc
    finally:
        stop(proc)


@contextlib.contextmanager
def proxy(upstream: str) -> Iterator[str]:
    with proxy_process(upstream) as (url, _):
        yield url


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    with serve("--sim-time-scale", "0.1") as server, proxy(server.url) as p:
        yield server.url, p


def stream(url: str, lang: str = "en", max_tokens: int = 20) -> dict:
    body = {
        "model": "llmchaos-sim-8b",
        "stream": True,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": "Tell me about caches."}],
    }
    start, d, out = time.perf_counter(), Decoder(), {"texts": [], "done": False, "ttft": None, "error": None}
    try:
        with httpx.stream(
            "POST", url + "/v1/chat/completions", json=body, headers={"x-llmchaos-lang": lang}, timeout=30
        ) as r:
            out["status"], out["retry_after"] = r.status_code, r.headers.get("retry-after")
            for raw in r.iter_raw():
                for ev in d.feed(raw):
                    if ev.data == "[DONE]":
                        out["done"] = True
                        continue
                    piece = (
                        json.loads(ev.data)["choices"][0]["delta"].get("content")
                        if r.status_code == 200 and json.loads(ev.data)["choices"]
                        else None
                    )
                    if piece:
                        out["ttft"] = out["ttft"] or time.perf_counter() - start
                        out["texts"].append(piece)
    except httpx.HTTPError as e:
        out["error"] = type(e).__name__
    return out


def set_fault(p: str, **params) -> dict:
    r = httpx.put(p + FAULT, json=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_no_fault_forwards_every_event_unchanged(urls):
    direct, p = urls
    httpx.delete(p + FAULT)
    a, b = stream(direct), stream(p)
    assert a["texts"] == b["texts"]
    assert len(a["texts"]) == 20
    assert b["done"]


@pytest.mark.timing
def test_drop_delay_cut_reset_and_errors(urls):
    direct, p = urls
    full = stream(direct)["texts"]
    set_fault(p, name="drop", drop_ratio=0.5, seed=3)
    dropped = stream(p)
    assert 4 <= len(dropped["texts"]) <= 16
    assert dropped["done"]
    assert all(t in full for t in dropped["texts"])

    set_fault(p, name="slow-first", first_event_delay=0.6)
    assert stream(p)["ttft"] > 0.6 > stream(direct)["ttft"]

    set_fault(p, name="cut", cut_after=5)
    cut = stream(p)
    assert not cut["done"]
    assert len(cut["texts"]) == 4  # the role chunk, then 4 content events

    set_fault(p, name="reset", cut_after=5, reset=True)
    reset = stream(p)
    assert not reset["done"]
    assert reset["error"] is not None

    set_fault(p, name="overload", error_ratio=1.0, error_status=503, retry_after=2)
    err = stream(p)
    assert err["status"] == 503
    assert err["retry_after"] == "2"


def test_corrupt_ratio_1_garbles_every_text_and_keeps_the_stream(urls):
    """Issue 32, a 200 with garbage: each content event's text replaced by as many punctuation marks,
    the stream still parsing to its end."""
    direct, p = urls
    upstream = stream(direct)["texts"]
    state = set_fault(p, name="garbage", corrupt_ratio=1, seed=5)
    assert state["fault"]["corrupt_ratio"] == 1.0
    try:
        got = stream(p)
    finally:
        httpx.delete(p + FAULT)
    assert got["done"]
    assert got["error"] is None
    assert len(got["texts"]) == len(upstream) == 20
    for text, original in zip(got["texts"], upstream, strict=True):
        assert text != original
        assert len(text) == len(original)
        assert not any(c.isalnum() or c.isspace() for c in text)


def test_fault_per_language_and_revert(urls):
    _direct, p = urls
    state = set_fault(p, name="de-only", cut_after=3, langs=["de"])
    assert state["active"]
    assert state["fault"]["langs"] == ["de"]
    assert not stream(p, "de")["done"]
    assert stream(p, "en")["done"]
    assert httpx.delete(p + FAULT).json() == {"active": False, "fault": None}
    assert stream(p, "de")["done"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"drop_ratio": 1.5}, "drop_ratio must be within [0, 1]"),
        ({"corrupt_ratio": 2}, "corrupt_ratio must be within [0, 1]"),
        ({"jitter": -1}, "jitter must not be negative"),
        ({"error_status": 404}, "error_status must be one of"),
        ({"colour": "red"}, "unknown field 'colour'"),
        ({"seed": {}}, "seed must be an integer"),
        ('{"first_event_delay": NaN}', "first_event_delay must be a finite number of seconds"),
        ({"error_status": 429.0}, "error_status must be one of"),
        ({"retry_after": "1\r\nset-cookie: x=1"}, "retry_after must be a whole number"),
        ({"cut_after": 2, "reset": "no"}, "reset must be true or false"),
        ({"langs": "en"}, "langs must be a list of language tags"),
        ([1], "a fault is a JSON object"),
    ],
)
def test_bad_fault_is_refused_and_nothing_applied(urls, params, message):
    _, p = urls
    httpx.delete(p + FAULT)
    r = httpx.put(p + FAULT, **{"content" if isinstance(params, str) else "json": params})
    assert r.status_code == 400
    assert message in r.json()["error"]
    assert httpx.get(p + FAULT).json()["active"] is False


@pytest.mark.parametrize("body", [b"{", b"\xff", b"[" * 100_000])
def test_a_body_that_is_not_json_is_refused(urls, body):
    _, p = urls
    r = httpx.put(p + FAULT, content=body)
    assert r.status_code == 400
    assert r.json()["error"].startswith("invalid JSON")


def test_the_control_api_takes_three_methods(urls):
    _, p = urls
    r = httpx.post(p + FAULT, json={"drop_ratio": 1})
    assert r.status_code == 405
    assert r.headers["allow"] == "GET, PUT, DELETE"
    assert httpx.get(p + FAULT).json()["active"] is False


def running(server: str) -> float:
    metrics = httpx.get(server + "/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith("vllm:num_requests_running{")
    )


@pytest.mark.timing
def test_plain_json_keep_alive_and_a_client_that_leaves(urls):
    direct, p = urls
    httpx.delete(p + FAULT)
    body = {
        "model": "llmchaos-sim-8b",
        "max_tokens": 5,
        "temperature": 0,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with httpx.Client(base_url=p) as c:  # one connection, several requests
        answers = [c.post("/v1/chat/completions", json=body) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert len({a.json()["choices"][0]["message"]["content"] for a in answers}) == 1
        assert c.get("/v1/models").json()["data"][0]["id"] == "llmchaos-sim-8b"
        assert c.post("/v1/chat/completions", json={**body, "max_tokens": -1}).status_code == 400
    long = {**body, "stream": True, "max_tokens": 2000}
    with httpx.stream("POST", p + "/v1/chat/completions", json=long, timeout=30) as r:
        chunks = r.iter_raw()
        next(chunks)
        time.sleep(0.1)
        assert running(direct) == 1
    deadline = time.monotonic() + 5  # the client left: the proxy cancels upstream, the server frees it
    while running(direct) != 0:
        assert time.monotonic() < deadline, "the upstream request outlived its client"
        time.sleep(0.05)


def test_an_unreachable_upstream_is_a_502():
    with proxy(f"http://127.0.0.1:{free_port()}") as p:
        r = httpx.post(p + "/v1/chat/completions", json={})
        assert r.status_code == 502
        assert r.json() == {"error": "upstream unreachable"}
        assert httpx.get(p + FAULT).json()["active"] is False
