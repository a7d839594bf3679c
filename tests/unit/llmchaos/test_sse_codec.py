import time

from llmchaos import sse_codec


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

    def cost(raw: bytes) -> tuple[float, int]:
        d, n, t = sse_codec.Decoder(), 0, time.perf_counter()
        for i in range(0, len(raw), step):
            n += len(d.feed(raw[i : i + step]))
        return time.perf_counter() - t, n

    (t_huge, n_huge), (t_small, n_small) = cost(huge), cost(small)
    assert (n_huge, n_small) == (1, size // 102)
    assert t_huge < 3 * t_small + 0.05, (t_huge, t_small)
