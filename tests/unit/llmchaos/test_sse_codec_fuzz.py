"""Fuzz: the decoder against the WHATWG rules for an event stream, written out literally below, and
against itself fed in any split."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from llmchaos import sse_codec

pytestmark = pytest.mark.fuzz

Seen = tuple[str, str, str | None, bool]  # data, type, last event ID, valid UTF-8


def reference(stream: bytes) -> list[Seen]:
    """https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation,
    step by step, on the whole stream."""
    if stream.startswith(b"\xef\xbb\xbf"):  # UTF-8 decode strips one leading BOM
        stream = stream[3:]
    *lines, _unfinished = re.split(rb"\r\n|\r|\n", stream)  # pending data at the end is discarded
    out: list[Seen] = []
    data, event_type, last_id = b"", b"", None
    for line in lines:
        if line == b"":  # dispatch
            if data == b"":
                data = event_type = b""
                continue
            data = data.removesuffix(b"\n")
            try:
                text, ok = data.decode(), True
            except UnicodeDecodeError:
                text, ok = data.decode(errors="replace"), False
            ident = None if last_id is None else last_id.decode(errors="replace")
            out.append((text, event_type.decode(errors="replace") or "message", ident, ok))
            data = event_type = b""
        elif line.startswith(b":"):
            continue
        else:
            field, colon, value = line.partition(b":")
            if colon and value.startswith(b" "):
                value = value[1:]
            if field == b"event":
                event_type = value
            elif field == b"data":
                data += value + b"\n"
            elif field == b"id" and b"\0" not in value:
                last_id = value
    return out


def decode(chunks: list[bytes]) -> tuple[list[Seen], bool]:
    d, out = sse_codec.Decoder(), []
    for c in chunks:
        out += [(e.data, e.event, e.id, e.valid_utf8) for e in d.feed(c)]
    return out, d.pending()


VALUES = st.one_of(
    st.binary(max_size=6),
    st.text(max_size=6).map(str.encode),
    st.sampled_from([b"", b" ", b"  x", b"[DONE]", b"\x00", "日本".encode(), sse_codec.BOM, b"\xe6\x97"]),
)
FIELDS = st.tuples(
    st.sampled_from([b"data"] * 4 + [b"event", b"event", b"id", b"id", b"retry", b"", b"dat", b"data ", b"DATA"]),
    st.sampled_from([b":", b": ", b""]),
    VALUES,
).map(b"".join)
LINE = st.one_of(FIELDS, FIELDS, VALUES.map(lambda v: b":" + v))  # a field, or a comment
EVENT = st.lists(LINE, max_size=4).map(lambda lines: [*lines, b""])  # then a blank line: dispatch
ENDS = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """Events with any line ends, maybe after a BOM (or part of one), maybe cut short; or any bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=64))
    lines = [line for event in draw(st.lists(EVENT, max_size=6)) for line in event]
    body = b"".join(line + draw(ENDS) for line in lines)
    return draw(st.sampled_from([b"", sse_codec.BOM, sse_codec.BOM[:2]])) + body + draw(LINE | st.just(b"\r"))


@given(stream=streams(), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8))
@example(stream=b"data: a\r\n\ndata: b\n\n", cuts=[8, 8, 9])  # CR | empty read | LF | LF: one blank line
@example(stream=sse_codec.BOM + b"data: x\n\n", cuts=[1, 2])
def test_any_split_gives_the_spec_events_of_the_whole(stream: bytes, cuts: list[int]):
    points = sorted(c % (len(stream) + 1) for c in cuts)
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    whole = decode([stream])
    assert decode(chunks) == whole
    assert whole[0] == reference(stream)
