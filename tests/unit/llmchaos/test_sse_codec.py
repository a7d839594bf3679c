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
