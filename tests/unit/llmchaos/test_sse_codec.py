import re
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from llmchaos import sse_codec
from llmchaos.sse_codec import MAX_FIELD, Decoder, Event


def feed_all(chunks: list[bytes]) -> tuple[list[sse_codec.Event], sse_codec.Decoder]:
    d = sse_codec.Decoder()
    out: list[sse_codec.Event] = []
    for c in chunks:
        out += d.feed(c)
    return out, d


def test_encode_round_trips_multiline_and_event_name():
    raw = sse_codec.encode("a\nb", event="error")
    assert raw == b"event: error\ndata: a\ndata: b\n\n"
    (ev,), _ = feed_all([raw])
    assert (ev.event, ev.data) == ("error", "a\nb")


def test_events_split_across_every_byte_boundary():
    raw = b'data: {"x": 1}\n\ndata: [DONE]\n\n'
    for cut in range(1, len(raw)):
        evs, d = feed_all([raw[:cut], raw[cut:]])
        assert [e.data for e in evs] == ['{"x": 1}', "[DONE]"]
        assert not d.pending()


def test_crlf_and_cr_line_ends_even_when_split_between_cr_and_lf():
    raw = b"data: one\r\n\r\ndata: two\r\rdata: three\n\n"
    for cut in range(1, len(raw)):
        evs, _ = feed_all([raw[:cut], raw[cut:]])
        assert [e.data for e in evs] == ["one", "two", "three"], cut


@pytest.mark.parametrize(
    ("chunk", "trailed"),
    [
        (b"data: a\n\n", False),
        (b"data: a\r\n\r\n", False),
        (b": ping\n\ndata: a\n\n", False),  # a comment before it came before it
        (b"data: a\n\n: ping\n\n", True),  # after it: its stamp is the comment's
        (b"data: a\n\nda", True),  # part of the next line
        (b"data: a\n\nid: 7\n", True),  # a field of the next event
        (b"data: a\n\ndata: b\n\n", False),  # two events, the last ending the chunk
        (b"data: a", False),  # no event: nothing to have trailed
    ],
)
def test_a_chunk_that_went_on_past_its_last_event_says_so(chunk, trailed):
    d = sse_codec.Decoder()
    d.feed(chunk)
    assert d.trailed is trailed


def test_comments_are_counted_not_dispatched():
    evs, d = feed_all([b": keep-alive\n\ndata: x\n\n:\n\n"])
    assert [e.data for e in evs] == ["x"]
    assert d.comments == 2


def test_field_without_space_and_id():
    (ev,), _ = feed_all([b"id:7\ndata:x\n\n"])
    assert (ev.id, ev.data) == ("7", "x")


def test_invalid_utf8_is_flagged_not_raised():
    (ev,), _ = feed_all([b"data: \xff\xfeok\n\n"])
    assert not ev.valid_utf8
    assert ev.data.endswith("ok")


def test_multibyte_utf8_split_across_reads():
    raw = "data: 日本語\n\n".encode()
    (ev,), _ = feed_all([raw[:8], raw[8:]])
    assert ev.data == "日本語"
    assert ev.valid_utf8


def test_cut_stream_leaves_pending_bytes():
    evs, d = feed_all([b'data: ok\n\ndata: {"half'])
    assert [e.data for e in evs] == ["ok"]
    assert d.pending()


# -- the WHATWG rules (https://html.spec.whatwg.org/multipage/server-sent-events.html) -----------
def test_an_event_without_data_is_not_dispatched():
    evs, d = feed_all([b"event: ping\n\n", b'data: {"a": 1}\n\n'])
    assert [(e.event, e.data) for e in evs] == [("message", '{"a": 1}')]  # the type does not carry over
    assert not d.pending()


def test_an_empty_data_field_dispatches_empty_data():
    """`data:` appends an empty line to the data buffer: the spec dispatches it with data ""."""
    evs, _ = feed_all([b"data:\n\ndata\n\n"])
    assert [e.data for e in evs] == ["", ""]


def test_bare_cr_line_ends():
    evs, d = feed_all([b"data: one\r\rdata: two\r\r"])
    assert [e.data for e in evs] == ["one", "two"]
    assert not d.pending()


def test_a_leading_bom_is_stripped_even_when_split():
    raw = b"\xef\xbb\xbfdata: first\n\ndata: second\n\n"
    for cut in range(len(raw)):
        evs, _ = feed_all([raw[:cut], raw[cut:]])
        assert [e.data for e in evs] == ["first", "second"], cut


def test_only_the_first_bom_is_stripped():
    (ev,), _ = feed_all([b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n"])
    assert ev.data == "y"  # the second BOM is part of the first line's field name


def test_the_last_event_id_carries_over_and_an_id_with_nul_is_ignored():
    evs, _ = feed_all([b"id: 1\ndata: a\n\ndata: b\n\nid: 2\x00\ndata: c\n\n"])
    assert [(e.id, e.data) for e in evs] == [("1", "a"), ("1", "b"), ("1", "c")]


def test_a_huge_event_costs_what_many_small_ones_cost():
    """Feeding one 8 MB event in 4 KB reads takes about as long as 8 MB of small events (it took
    quadratic time: every read copied and rescanned the whole buffer)."""
    size, step = 8_000_000, 4096
    huge = b"data: " + b"x" * size + b"\n\n"
    small = (b"data: " + b"x" * 94 + b"\n\n") * (size // 102)

    def once(raw: bytes) -> tuple[float, int]:
        d, n, t = sse_codec.Decoder(), 0, time.perf_counter()
        for i in range(0, len(raw), step):
            n += len(d.feed(raw[i : i + step]))
        return time.perf_counter() - t, n

    def cost(raw: bytes) -> tuple[float, int]:
        """The quickest of three: what the work costs, not what a neighbour's burst of CPU added."""
        return min(once(raw) for _ in range(3))

    (t_huge, n_huge), (t_small, n_small) = cost(huge), cost(small)
    assert (n_huge, n_small) == (1, size // 102)
    assert t_huge < 3 * t_small + 0.05, (t_huge, t_small)


# -- fuzz: the decoder against the WHATWG rules written out literally, and against itself in any split
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


@pytest.mark.fuzz
@given(stream=streams(), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8))
@example(stream=b"data: a\r\n\ndata: b\n\n", cuts=[8, 8, 9])  # CR | empty read | LF | LF: one blank line
@example(stream=sse_codec.BOM + b"data: x\n\n", cuts=[1, 2])
def test_any_split_gives_the_spec_events_of_the_whole(stream: bytes, cuts: list[int]):
    points = sorted(c % (len(stream) + 1) for c in cuts)
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    whole = decode([stream])
    assert decode(chunks) == whole
    assert whole[0] == reference(stream)


def test_a_line_or_an_event_past_the_limit_stops_the_decoding_and_says_which():
    # defect 2 of issue 34: `data: xxxx...` with no line end grew the decoder to 2.5 GB in 10 s
    line = Decoder()
    assert line.feed(b"data: ok\n\n") == [Event("ok")]
    for _ in range(MAX_FIELD // 65536):
        assert line.feed(b"x" * 65536) == []
    assert line.overflow is None
    assert line.feed(b"x") == []
    assert line.overflow == "an SSE line over 8 MiB"
    assert line.feed(b"\n\ndata: later\n\n") == []  # stopped for good
    data = Decoder()
    piece = b"data: " + b"y" * (1 << 20) + b"\n"  # lines that end, in an event that never does
    events = [e for _ in range(8) for e in data.feed(piece)]
    assert (events, data.overflow) == ([], "an event's data over 8 MiB")
    whole = Decoder()  # at the limit, an event is still one
    (ev,) = whole.feed(b"data: " + b"z" * (MAX_FIELD - 6) + b"\n\n")  # a line of MAX_FIELD bytes
    assert len(ev.data) == MAX_FIELD - 6
    assert whole.overflow is None
