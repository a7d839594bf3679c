"""The scripted test server (tests/servers/scripted.py) over real HTTP: vLLM's SSE shape, timing
truth against what a client measures, seeded draws, every misbehaviour mode, the stall window."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from llmchaos.sse_codec import Decoder, Event
from tests.noise import WakeNoise
from tests.servers import scripted

FAST = {"ttft_ms": [5, 5], "itl_ms": [2, 2]}
MSGS = [{"role": "user", "content": "Tell me four things"}]


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with scripted.running(seed=1) as url, httpx.Client(base_url=url, timeout=10) as c:
        yield c


def body(n: int = 4, stream: bool = True, timing: dict | None = FAST, usage: bool = False, **script) -> dict:
    b = {"model": "m", "messages": MSGS, "stream": stream, "max_tokens": n, "x_script": {**(timing or {}), **script}}
    return {**b, "stream_options": {"include_usage": True}} if usage else b


@dataclass
class Got:
    """One streamed response as the client saw it; times are monotonic seconds since the send."""

    rid: str
    status: int = 0
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    raw: bytes = b""
    events: list[tuple[float, int, Event]] = field(default_factory=list)  # (arrival, time_ns, event)
    decoder: Decoder = field(default_factory=Decoder)
    error: Exception | None = None

    @property
    def datas(self) -> list[str]:
        return [e.data for _, _, e in self.events]

    def content(self) -> list[tuple[float, int, dict]]:
        """(arrival, arrival time_ns, chunk) of each content chunk."""
        out = []
        for t, ns, e in self.events:
            with_content = e.valid_utf8 and e.data.startswith("{") and '"content":" ' in e.data
            if with_content:
                out.append((t, ns, json.loads(e.data)))
        return out


def post(c: httpx.Client, b: dict, lang: str = "en", max_events: int | None = None) -> Got:
    got = Got(uuid.uuid4().hex)
    headers = {"x-llmchaos-lang": lang, "x-request-id": got.rid}
    t0 = time.monotonic()
    with c.stream("POST", "/v1/chat/completions", json=b, headers=headers) as r:
        got.status, got.headers = r.status_code, r.headers
        try:
            for chunk in r.iter_raw():
                now, ns = time.monotonic(), time.time_ns()
                got.raw += chunk
                got.events += [(now - t0, ns, e) for e in got.decoder.feed(chunk)]
                if max_events and len(got.events) >= max_events:
                    break
        except httpx.TransportError as e:
            got.error = e
    return got


def truth(c: httpx.Client, rid: str, timeout: float = 3.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        for rec in c.get("/truth").json()["requests"]:
            if rec["request_id"] == rid:
                return rec
        assert time.monotonic() < deadline, f"no truth for {rid}"
        time.sleep(0.02)


# -- normal streams -----------------------------------------------------------------------------
def test_normal_stream_has_vllm_sse_shape(client):
    g = post(client, body(n=5, usage=True), lang="de")
    assert g.status == 200
    assert g.headers["content-type"].startswith("text/event-stream")
    assert g.error is None
    assert not g.decoder.pending()
    assert g.datas[-1] == "[DONE]"
    chunks = [json.loads(d) for d in g.datas[:-1]]
    assert len(chunks) == 1 + 5 + 1
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m" for c in chunks)
    assert chunks[0]["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    words = [c["choices"][0]["delta"]["content"] for c in chunks[1:6]]
    assert words == [" der", " schnelle", " braune", " Fuchs", " springt"]
    assert [c["choices"][0]["finish_reason"] for c in chunks[1:6]] == [None] * 4 + ["length"]
    assert all(isinstance(c["x_sent_ns"], int) for c in chunks[1:6])
    assert "x_sent_ns" not in chunks[0]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9}
    rec = truth(client, g.rid)
    assert (rec["lang"], rec["mode"], rec["output_tokens"], len(rec["gaps_s"])) == ("de", "ok", 5, 4)

    plain = post(client, body(n=2))
    assert len(plain.datas) == 1 + 2 + 1
    assert '"usage"' not in plain.raw.decode()


def test_non_stream_returns_a_chat_completion(client):
    r = client.post("/v1/chat/completions", json=body(n=3, stream=False), headers={"x-llmchaos-lang": "ja"})
    out = r.json()
    assert r.status_code == 200
    assert out["object"] == "chat.completion"
    assert out["choices"][0]["message"]["content"] == " 素早い 茶色の 狐が"
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 3


@pytest.mark.timing
def test_truth_matches_what_a_client_measures(client):
    """The server's truth is when it really wrote each event: the client's gaps differ from it by
    exactly how much later the client read one event than the one before (each event carries the
    server's wall clock at its write). Lateness against the plan stays within the machine's worst
    wake-up delay of this run, event after event: sleeping to deadlines, it never adds up."""
    client.get("/healthz")  # a warm keep-alive connection: no connect time in the client's TTFT
    with WakeNoise() as noise:
        g = post(client, body(n=12, timing=None))
    rec = truth(client, g.rid)
    content = g.content()
    assert len(content) == 12 == rec["output_tokens"]
    assert rec["stalled_s"] < 0.002 + noise.worst
    assert 0.040 <= rec["intended_ttft_s"] <= 0.060
    assert all(0.008 <= x <= 0.014 for x in rec["intended_gaps_s"])
    due = [rec["intended_ttft_s"] + sum(rec["intended_gaps_s"][:i]) for i in range(12)]
    wrote = [rec["ttft_s"] + sum(rec["gaps_s"][:i]) for i in range(12)]
    late = [w - d for w, d in zip(wrote, due, strict=True)]
    assert all(0 <= x <= 0.002 + noise.worst for x in late), (late, noise.worst)
    # The client sees each write later than the server made it, never earlier.
    lags = [(ns - chunk["x_sent_ns"]) / 1e9 for _, ns, chunk in content]
    assert all(lag >= 0 for lag in lags), lags
    assert content[0][0] >= rec["ttft_s"]
    client_gaps = [b[0] - a[0] for a, b in itertools.pairwise(content)]
    read_later = [b - a for a, b in itertools.pairwise(lags)]
    off = [c - t - r for c, t, r in zip(client_gaps, rec["gaps_s"], read_later, strict=True)]
    assert max(map(abs, off)) < 0.0002, off  # the monotonic and wall clocks' rounding, no more


def test_same_seed_draws_the_same_per_language_sequence():
    order = [("en", 3), ("de", 2), ("en", 2), ("zh", 1), ("ja", 1), ("fr", 2)]
    seen = []
    for _ in range(2):
        with scripted.running(seed=7) as url, httpx.Client(base_url=url, timeout=10) as c:
            recs = [truth(c, post(c, body(n=n, timing=None), lang=lang).rid) for lang, n in order]
            seen.append([(r["lang"], r["n"], r["intended_ttft_s"], r["intended_gaps_s"]) for r in recs])
    assert seen[0] == seen[1]
    for lang, n, ttft, gaps in seen[0]:
        rng = scripted.plan_rng(7, lang, n)
        lo, hi = scripted.TTFT_MS.get(lang, scripted.OTHER_TTFT_MS)
        assert ttft == rng.uniform(lo, hi) / 1000
        assert gaps == [rng.uniform(8, 14) / 1000 for _ in gaps]
    assert [x[1] for x in seen[0]] == [0, 0, 1, 0, 0, 0]
    assert seen[0][0][2] != seen[0][2][2]
    assert 0.100 <= seen[0][4][2] <= 0.150  # ja
    assert 0.050 <= seen[0][5][2] <= 0.080  # fr (others)


# -- misbehaviour modes -------------------------------------------------------------------------
def test_cut_sends_k_events_then_half_an_event_and_aborts(client):
    g = post(client, body(n=8, mode="cut", after=3))
    assert isinstance(g.error, httpx.RemoteProtocolError | httpx.ReadError), g.error
    assert len(g.events) == 1 + 3
    assert len(g.content()) == 3
    assert g.decoder.pending()
    assert g.raw.endswith(b'data: {"id":')
    rec = truth(client, g.rid)
    assert rec["output_tokens"] == 3
    assert not rec["disconnected"]


def test_garbage_is_an_sse_response_of_non_sse_bytes(client):
    g = post(client, body(mode="garbage"))
    assert g.status == 200
    assert g.headers["content-type"].startswith("text/event-stream")
    assert g.error is None
    assert len(g.raw) > 100
    assert g.events == []
    with pytest.raises(UnicodeDecodeError):
        g.raw.decode()
    assert truth(client, g.rid)["output_tokens"] == 0


def test_wrong_content_type_is_html(client):
    g = post(client, body(mode="wrong_content_type"))
    assert g.status == 200
    assert g.headers["content-type"].startswith("text/html")
    assert b"<html>" in g.raw


@pytest.mark.parametrize("code", [429, 500, 503])
def test_status_returns_an_openai_error(client, code):
    r = client.post("/v1/chat/completions", json=body(mode="status", status=code))
    assert r.status_code == code
    assert r.json()["error"]["code"] == code
    assert r.json()["error"]["message"]
    assert r.headers.get("retry-after") == ("1" if code in (429, 503) else None)


def test_never_ending_streams_until_the_client_leaves(client):
    g = post(client, body(n=4, mode="never_ending", ttft_ms=[1, 1], itl_ms=[1, 1]), max_events=60)
    chunks = [c for _, _, c in g.content()]
    assert len(chunks) >= 59
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    rec = truth(client, g.rid)
    assert rec["disconnected"]
    assert rec["output_tokens"] >= 59


@pytest.mark.timing
def test_stall_goes_silent_after_k_events_then_finishes(client):
    g = post(client, body(n=5, mode="stall", after=2, seconds=0.4))
    times = [t for t, _, _ in g.content()]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) == 5
    assert g.datas[-1] == "[DONE]"
    # silence is on the deadline schedule
    assert gaps[1] >= 0.39
    assert max(gaps[:1] + gaps[2:]) < 0.1
    rec = truth(client, g.rid)
    assert rec["gaps_s"][1] >= 0.39
    assert rec["intended_gaps_s"][1] < 0.01


def test_bad_json_is_one_unparseable_event_among_valid_ones(client):
    g = post(client, body(n=4, mode="bad_json", after=2))
    bad = [i for i, d in enumerate(g.datas[:-1]) if not _parses(d)]
    assert [g.datas[i] for i in bad] == ['{"choices": [}']
    assert bad == [3]  # role, 2 tokens, bad
    assert len(g.content()) == 4
    assert g.datas[-1] == "[DONE]"
    assert g.error is None


def test_error_event_follows_k_events(client):
    g = post(client, body(n=6, mode="error_event", after=2))
    assert len(g.content()) == 2
    assert g.datas[-1] == "[DONE]"
    assert json.loads(g.datas[-2]) == {"error": {"message": "boom", "type": "server_error", "code": 500}}
    assert truth(client, g.rid)["output_tokens"] == 2


def test_bad_utf8_is_one_event_with_invalid_bytes(client):
    g = post(client, body(n=4, mode="bad_utf8", after=1))
    assert [i for i, (_, _, e) in enumerate(g.events) if not e.valid_utf8] == [2]
    assert len(g.content()) == 4
    assert g.datas[-1] == "[DONE]"


def test_no_done_ends_cleanly_without_done(client):
    g = post(client, body(n=3, mode="no_done"))
    assert g.error is None
    assert not g.decoder.pending()
    assert "[DONE]" not in g.datas
    assert json.loads(g.datas[-1])["choices"][0]["finish_reason"] == "length"


def _parses(data: str) -> bool:
    try:
        json.loads(data)
        return True
    except ValueError:
        return False


# -- stall window, truth API ----------------------------------------------------------------------
@pytest.mark.timing
def test_stall_window_holds_requests_received_inside_it(client):
    streaming: list[Got] = []
    with httpx.Client(base_url=str(client.base_url), timeout=10) as other:
        long = body(n=50, ttft_ms=[5, 5], itl_ms=[10, 10])
        t = threading.Thread(target=lambda: streaming.append(post(other, long)))
        t.start()
        time.sleep(0.1)  # that stream is running before the window opens
        window = client.post("/control", json={"stall_for_s": 0.5}).json()
        assert window["active"]
        assert window["stall_end_unix"] - window["stall_start_unix"] == pytest.approx(0.5)
        held = post(client, body(n=2))
        t.join()
    rec = truth(client, held.rid)
    assert held.content()[0][0] >= 0.4
    assert rec["stalled_s"] >= 0.4
    assert rec["ttft_s"] >= rec["stalled_s"] + rec["intended_ttft_s"] - 0.001
    assert window["stall_start_unix"] <= rec["start_unix"] <= window["stall_end_unix"]
    assert max(truth(client, streaming[0].rid)["gaps_s"]) < 0.05  # already streaming: unaffected
    assert not client.get("/control").json()["active"]
    assert truth(client, post(client, body(n=1)).rid)["stalled_s"] < 0.01


def test_truth_can_be_cleared(client):
    post(client, body(n=1))
    assert client.get("/truth").json()["requests"]
    assert client.delete("/truth").status_code == 200
    assert client.get("/truth").json() == {"requests": []}


# -- misbehaviours of valid SSE and of streams that end oddly -------------------------------------
def read_for(c: httpx.Client, b: dict, seconds: float) -> tuple[Got, float | None]:
    """A stream read for `seconds` at most (it may never end): what came, and when [DONE] did."""
    got, done_at, t0 = Got(uuid.uuid4().hex), None, time.monotonic()
    with c.stream("POST", "/v1/chat/completions", json=b, headers={"x-request-id": got.rid}) as r:
        got.status, got.headers = r.status_code, r.headers
        with contextlib.suppress(httpx.ReadTimeout):
            for chunk in r.iter_raw():
                got.raw += chunk
                got.events += [(time.monotonic() - t0, 0, e) for e in got.decoder.feed(chunk)]
                if done_at is None and "[DONE]" in got.datas:
                    done_at = time.monotonic() - t0
                if time.monotonic() - t0 > seconds:
                    break
    return got, done_at


@pytest.fixture(scope="module")
def short_reads(client) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=str(client.base_url), timeout=httpx.Timeout(10, read=0.5)) as c:
        yield c


@pytest.mark.timing
def test_late_headers_hold_the_response_then_stream(client):
    t0 = time.monotonic()
    with client.stream("POST", "/v1/chat/completions", json=body(n=2, mode="late_headers", seconds=0.4)) as r:
        assert time.monotonic() - t0 >= 0.4
        raw = r.read()
    assert raw.endswith(scripted.DONE)


@pytest.mark.parametrize(("mode", "comments"), [("hold_open", False), ("done_then_comments", True)])
def test_the_body_stays_open_after_done(short_reads, mode, comments):
    got, done_at = read_for(short_reads, body(n=3, mode=mode, itl_ms=[20, 20]), 1.0)
    assert done_at is not None
    assert got.datas[-1] == "[DONE]"  # nothing but comments (or nothing) after it
    assert (got.decoder.comments > 5) is comments
    assert not got.raw.endswith(scripted.DONE) if comments else got.raw.endswith(scripted.DONE)


@pytest.mark.timing  # ten bytes at 10 ms each within 0.5 s: a starved server trickles fewer
def test_trickle_never_ends_a_line(short_reads):
    got, done_at = read_for(short_reads, body(n=5, mode="trickle", after=2, itl_ms=[10, 10]), 0.5)
    assert done_at is None
    assert len(got.content()) == 2
    tail = got.raw.rpartition(b"\n\n")[2]
    assert tail.startswith(b'data: {"choices"')
    assert tail.endswith(b"aaaaaaaaaa")
    assert b"\n" not in tail
    assert b"\r" not in tail


def test_ping_interleaves_events_the_spec_ignores_or_leaves_empty(client):
    g = post(client, body(n=3, mode="ping"))
    assert g.raw.count(scripted.PING) == 3
    assert g.datas.count("") == 3  # `data:` alone: dispatched with empty data; `event: ping` alone: not at all
    assert all(e.event == "message" for _, _, e in g.events)
    assert len(g.content()) == 3


def test_cr_ends_every_line_with_a_bare_cr(client):
    g = post(client, body(n=3, mode="cr"))
    assert b"\n" not in g.raw
    assert g.raw.endswith(b"data: [DONE]\r\r")
    assert len(g.content()) == 3
    assert g.datas[-1] == "[DONE]"


def test_bom_starts_the_body(client):
    g = post(client, body(n=2, mode="bom"))
    assert g.raw.startswith(scripted.BOM + b"data: ")
    assert json.loads(g.datas[0])["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_huge_puts_size_bytes_into_one_event(client):
    g = post(client, body(n=4, mode="huge", after=1, size=600_000))
    sizes = [len(c["choices"][0]["delta"]["content"]) for _, _, c in g.content()]
    assert sizes == [4, 600_000 // 6 * 6, 6, 4]


def test_eos_first_ends_before_any_text(client):
    g = post(client, body(n=5, mode="eos_first", usage=True))
    chunks = [json.loads(d) for d in g.datas[:-1]]
    assert g.datas[-1] == "[DONE]"
    assert [c["choices"][0]["delta"] for c in chunks[:2]] == [{"role": "assistant", "content": ""}, {}]
    assert chunks[1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[2]["usage"]["completion_tokens"] == 1
    assert g.content() == []
    assert truth(client, g.rid)["output_tokens"] == 0
