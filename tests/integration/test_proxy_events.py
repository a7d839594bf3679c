"""SSE events through the proxy when the upstream splits them across reads anywhere, with every line
ending the SSE spec allows (CRLF, LF, CR): byte for byte with no fault and with a fault that changes
nothing, and exactly N events with `cut_after: N`."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from llmchaos.sse_codec import Decoder
from tests.integration.test_sse_proxy import FAULT, proxy
from tests.servers import raw_upstream
from tests.servers.raw_upstream import RawUpstream
from tests.sse_streams import split, sse_streams

HTTP = httpx.Client(timeout=10)  # one connection per proxy, kept: a fresh client per request costs more than the test
HEAD = {
    "chunked": "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    "close": "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[RawUpstream]:
    with raw_upstream.running() as u:
        yield u


@pytest.fixture(scope="module")
def noop(upstream: RawUpstream) -> Iterator[str]:
    """A proxy with a fault that changes nothing, for `de` requests only: `en` ones take the plain relay."""
    with proxy(upstream.url) as p:
        httpx.put(p + FAULT, json={"name": "noop", "langs": ["de"]}).raise_for_status()
        yield p


@pytest.fixture(scope="module")
def cutter(upstream: RawUpstream) -> Iterator[str]:
    with proxy(upstream.url) as p:
        yield p


def relay(p: str, stream: bytes, cuts: list[int], framing: str, lang: str = "en") -> httpx.Response:
    """The upstream writes `stream` in pieces cut at `cuts`, each its own read at the proxy."""
    pieces = split(stream, cuts)
    if framing == "chunked":
        pieces = [b"%x\r\n%s\r\n" % (len(x), x) for x in pieces] + [b"0\r\n\r\n"]
    script = {"pieces": [HEAD[framing]] + [x.decode("latin-1") for x in pieces], "gap_s": 0.0005}
    script["close"] = framing == "close"
    return HTTP.post(p + "/script", json=script, headers={"x-llmchaos-lang": lang})


def events(stream: bytes) -> list[str]:
    return [e.data for e in Decoder().feed(stream)]


@pytest.mark.parametrize("eol", ["\r\n", "\n", "\r"])
def test_cut_after_counts_events_whose_blank_line_is_split_across_reads(cutter, eol):
    httpx.put(cutter + FAULT, json={"name": "cut", "cut_after": 2}).raise_for_status()
    blocks = [f"data: {x}{eol}{eol}".encode() for x in ("1", "2", "3", "[DONE]")]
    ends = [sum(map(len, blocks[: i + 1])) for i in range(len(blocks))]
    stream = b"".join(blocks)
    r = relay(cutter, stream, [end - 1 for end in ends], "chunked")  # each blank line's last byte a read of its own
    assert events(r.content) == ["1", "2"]


@pytest.mark.fuzz
@given(stream=sse_streams(), cuts=st.lists(st.integers(0, 400), max_size=6), framing=st.sampled_from(list(HEAD)))
@example(stream=b"data: 1\r\n\r\ndata: 2\r\n\r\n", cuts=[11], framing="chunked")
def test_any_split_passes_byte_for_byte(noop, stream, cuts, framing):
    for lang in ("en", "de"):  # the plain relay, the fault's event splitter
        r = relay(noop, stream, cuts, framing, lang)
        assert r.content == stream


@pytest.mark.fuzz
@given(stream=sse_streams(), cuts=st.lists(st.integers(0, 400), max_size=6), n=st.integers(1, 6))
@example(stream=b"data: 1\r\n\r\ndata: 2\r\n\r\ndata: 3\r\n\r\n", cuts=[11], n=1)
def test_cut_after_n_delivers_exactly_n_events(cutter, stream, cuts, n):
    HTTP.put(cutter + FAULT, json={"name": "cut", "cut_after": n}).raise_for_status()
    r = relay(cutter, stream, cuts, "chunked")
    assert stream.startswith(r.content)
    assert events(r.content) == events(stream)[:n]
