import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from faults.proxy.events import Kind, Piece, Splitter
from llmchaos.sse_codec import Decoder
from tests.sse_streams import split, sse_streams


def pieces(reads: list[bytes]) -> list[Piece]:
    s = Splitter()
    out = [p for read in reads for p in s.feed(read)]
    rest = s.finish()
    return out + ([rest] if rest else [])


def joined(ps: list[Piece]) -> list[Piece]:
    """Each TAIL put back on the piece before it: the blocks as one read of the whole would give them."""
    out: list[Piece] = []
    for p in ps:
        if p.kind is Kind.TAIL:
            out[-1] = Piece(out[-1].data + p.data, out[-1].kind)
        else:
            out.append(p)
    return out


def test_every_line_end_and_a_crlf_split_across_reads():
    reads = [b"data: 1\r\n\r", b"\ndata: 2\n\n: hi\r\rdata: [DONE]\r", b"\r", b"data: x"]
    assert pieces(reads) == [
        Piece(b"data: 1\r\n\r", Kind.EVENT),
        Piece(b"\n", Kind.TAIL),
        Piece(b"data: 2\n\n", Kind.EVENT),
        Piece(b": hi\r\r", Kind.OTHER),
        Piece(b"data: [DONE]\r\r", Kind.DONE),
        Piece(b"data: x", Kind.OTHER),
    ]


def test_blank_lines_before_a_block_go_with_it():
    assert pieces([b"\n\r\ndata\n\n"]) == [Piece(b"\n\r\ndata\n\n", Kind.EVENT)]


@pytest.mark.fuzz
@given(stream=sse_streams(), cuts=st.lists(st.integers(0, 400), max_size=12))
@example(stream=b"data: 1\r\n\r\ndata: 2\r\n\r\n", cuts=[11])
def test_any_split_gives_the_same_blocks_byte_for_byte(stream, cuts):
    ps = pieces(split(stream, cuts))
    assert b"".join(p.data for p in ps) == stream
    assert joined(ps) == pieces([stream])
    dispatched = [p for p in ps if p.kind in (Kind.EVENT, Kind.DONE)]
    assert len(dispatched) == len(Decoder().feed(stream))
