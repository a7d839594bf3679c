from collections import Counter

import gevent

from loadtests.adapters import Message, ToolCall
from loadtests.distributions import parse
from loadtests.sessions import MAX_HOPS, SessionOptions, Sessions, merge, rows


def sessions(turns: int = 2, think: float = 0.0, tool_rate: float = 0.0) -> Sessions:
    return Sessions(
        SessionOptions(parse(str(turns), "--turns", True), parse(f"{think}s", "--turn-think", False), tool_rate), seed=1
    )


def test_a_conversation_grows_by_each_answer_and_completes_after_its_last_turn():
    s = sessions(turns=2)
    conv = s.turn("en", 0)
    assert (conv.id, conv.history) == ("en-0-0", [])
    assert s.sent(conv, "hi") == 1
    s.answered(conv, ok=True, answer="hello", calls=[], at_stop=False)
    again = s.turn("en", 0)
    assert again is conv
    assert again.history == [Message("user", "hi"), Message("assistant", "hello")]
    assert s.sent(again, "more?") == 2
    s.answered(again, ok=True, answer="no", calls=[], at_stop=False)
    nxt = s.turn("en", 0)
    assert nxt.id == "en-0-1"
    assert nxt.history == []
    assert s.drain() == {"en": {"turns": 2, "started": 1, "completed": 1}}


def test_a_failed_turn_cuts_the_conversation_and_the_stop_cuts_those_open_once():
    s = sessions(turns=5)
    a, b = s.turn("en", 0), s.turn("de", 1)
    s.sent(a, "x"), s.sent(b, "y")
    s.answered(a, ok=False, answer="", calls=[], at_stop=False)  # cut: the next turn opens a new one
    assert s.turn("en", 0).id == "en-0-1"
    s.stop()  # b is in flight: cut by the stop ...
    s.answered(b, ok=False, answer="", calls=[], at_stop=True)  # ... and not counted again when it ends
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
    s.answered(conv, ok=True, answer="a", calls=[], at_stop=False)
    gevent.sleep(0.01)
    assert not waiting.ready()  # thinking
    assert waiting.get(timeout=1) is conv


def test_the_run_counts_merge_per_language_into_rows():
    totals: dict[str, Counter[str]] = {}
    merge(totals, {"en": {"started": 2, "turns": 5, "completed": 1}})
    merge(totals, {"en": {"cut_stop": 1}})
    (row,) = rows(totals, "http://t", "openai-chat")
    assert (row.started, row.completed, row.cut_stop, row.cut_failed, row.turns) == (2, 1, 1, 0, 5)


def test_a_tool_call_is_answered_at_once_in_the_same_turn_until_the_answer_is_text():
    s = sessions(turns=1, think=60.0, tool_rate=1.0)  # a hop never thinks
    conv = s.turn("en", 0)
    assert s.sent(conv, "weather?") == 1
    assert conv.tools
    call = ToolCall("c1", "search", '{"query": "weather"}')
    s.answered(conv, ok=True, answer="", calls=[call], at_stop=False)
    hop = s.turn("en", 0)
    assert hop is conv
    assert hop.calls == (call,)
    result = (Message("tool", "sunny", call=call),)
    assert s.hop(hop, result) == 1
    assert (hop.sent, hop.calls) == (1, ())  # still the first turn
    s.answered(hop, ok=True, answer="It is sunny.", calls=[], at_stop=False)
    assert conv.history == [
        Message("user", "weather?"),
        Message("assistant", calls=(call,)),
        Message("tool", "sunny", call=call),
        Message("assistant", "It is sunny."),
    ]
    assert s.drain() == {"en": {"turns": 1, "started": 1, "tool_hops": 1, "completed": 1}}


def test_a_model_still_calling_tools_after_the_last_hop_cuts_its_conversation():
    s = sessions(turns=3, tool_rate=1.0)
    conv = s.turn("en", 0)
    s.sent(conv, "go")
    call = ToolCall("c", "lookup", "{}")
    for _ in range(MAX_HOPS):
        s.answered(conv, ok=True, answer="", calls=[call], at_stop=False)
        s.hop(s.turn("en", 0), (Message("tool", "r", call=call),))
    s.answered(conv, ok=True, answer="", calls=[call], at_stop=False)
    assert s.turn("en", 0) is not conv
    assert s.drain()["en"]["cut_failed"] == 1


def test_turns_offer_tools_at_the_rate_and_none_without_it():
    s = sessions(turns=1, tool_rate=0.3)
    offered = 0
    for user in range(400):
        conv = s.turn("en", user)
        s.sent(conv, "x")
        offered += conv.tools
    assert 80 < offered < 160  # 30 % of 400
    s = sessions(turns=1)
    conv = s.turn("en", 0)
    s.sent(conv, "x")
    assert not conv.tools
