from collections import Counter

import gevent

from loadtests.sessions import SessionOptions, Sessions, Span, merge, rows


def sessions(turns: int = 2, think: float = 0.0) -> Sessions:
    return Sessions(SessionOptions(Span(turns, turns), Span(think, think)), seed=1)


def test_a_conversation_grows_by_each_answer_and_completes_after_its_last_turn():
    s = sessions(turns=2)
    conv = s.turn("en", 0)
    assert (conv.id, conv.history) == ("en-0-0", [])
    assert s.sent(conv, "hi") == 1
    s.answered(conv, ok=True, answer="hello", at_stop=False)
    again = s.turn("en", 0)
    assert again is conv
    assert again.history == [("hi", "hello")]
    assert s.sent(again, "more?") == 2
    s.answered(again, ok=True, answer="no", at_stop=False)
    nxt = s.turn("en", 0)
    assert nxt.id == "en-0-1"
    assert nxt.history == []
    assert s.drain() == {"en": {"turns": 2, "started": 1, "completed": 1}}


def test_a_failed_turn_cuts_the_conversation_and_the_stop_cuts_those_open_once():
    s = sessions(turns=5)
    a, b = s.turn("en", 0), s.turn("de", 1)
    s.sent(a, "x"), s.sent(b, "y")
    s.answered(a, ok=False, answer="", at_stop=False)  # cut: the next turn opens a new one
    assert s.turn("en", 0).id == "en-0-1"
    s.stop()  # b is in flight: cut by the stop ...
    s.answered(b, ok=False, answer="", at_stop=True)  # ... and not counted again when it ends
    assert s.drain() == {
        "en": {"turns": 1, "started": 1, "cut_failed": 1},
        "de": {"turns": 1, "started": 1, "cut_stop": 1},
    }


def test_the_next_turn_waits_for_the_answer_then_the_think_time():
    s = sessions(turns=3, think=0.05)
    conv = s.turn("en", 0)
    s.sent(conv, "x")
    waiting = gevent.spawn(s.turn, "en", 0)
    gevent.sleep(0.01)
    assert not waiting.ready()  # the answer is not in
    s.answered(conv, ok=True, answer="a", at_stop=False)
    gevent.sleep(0.01)
    assert not waiting.ready()  # thinking
    assert waiting.get(timeout=1) is conv


def test_the_run_counts_merge_per_language_into_rows():
    totals: dict[str, Counter[str]] = {}
    merge(totals, {"en": {"started": 2, "turns": 5, "completed": 1}})
    merge(totals, {"en": {"cut_stop": 1}})
    (row,) = rows(totals, "http://t", "openai-chat")
    assert (row.started, row.completed, row.cut_stop, row.cut_failed, row.turns) == (2, 1, 1, 0, 5)
