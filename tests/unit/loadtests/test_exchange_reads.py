"""An exchange's reads as the data plane hands them over (bytes, the kernel's receive stamp, how long
the kernel held them): several events in a read taken on time are the stream's, taken late the
generator's; stamps a fraction of a microsecond out of order never make a gap below zero."""

from __future__ import annotations

import json

from loadtests.adapters import ADAPTERS
from loadtests.dataplane.request import Exchange
from loadtests.dataplane.response import LATE_S, Limits
from loadtests.record import RequestRecord

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def event(text: str) -> bytes:
    body = ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n").encode()
    return b"%x\r\n%s\r\n" % (len(body), body)


def exchange() -> Exchange:
    rec = RequestRecord("en", "openai-chat", "t")
    return Exchange(ADAPTERS["openai-chat"], b"", True, rec, 100.0, Limits(), lambda: None)


def test_events_read_together_on_time_are_the_stream_s_and_late_the_generator_s():
    ex = exchange()
    ex.received(HEAD + event("a"), 100.1, 0.0)
    ex.received(event("b") + event("c"), 100.2, LATE_S / 10)  # a burst, read at once
    ex.received(event("d") + event("e"), 100.3, LATE_S)  # two events whose first may have waited: read late
    ex.received(event("f"), 100.4, 0.5)  # late, but one event: its stamp is its own
    rec = ex.rec
    assert rec.chunks == list("abcdef")
    assert (rec.reads, rec.coalesced_reads, rec.late_reads) == (4, 2, 1)
    # each read of several events leaves its events' times uncertain by its bound (the error bar), but
    # its last: its stamp is its own
    assert rec.late_spans == [(1, 1, LATE_S / 10), (3, 1, LATE_S)]


def test_a_stamp_a_fraction_of_a_microsecond_before_the_one_ahead_is_no_gap_below_zero():
    # back-to-back events on loopback: the stamps' conversion to perf_counter jitters by ~0.3 us, and a
    # gap of -2e-7 s made the run's own requests.jsonl unreadable ("gaps: a gap below zero")
    ex = exchange()
    ex.received(HEAD + event("a"), 100.1, 0.0)
    ex.received(event("b"), 100.1 - 2e-7, 0.0)
    ex.received(event("c") + b"0\r\n\r\n", 100.1 + 1e-6, 0.0)
    assert ex.rec.gaps[0] == 0.0
    assert min(ex.rec.gaps) >= 0.0
    assert ex.rec.line().problem() is None
