"""Each record's place in its conversation (loadtests/logs/conversations.py): a log's own session ids
counted in turns; in a trace of prompt blocks (Mooncake's conversation trace), a row whose blocks
begin with all of an earlier conversation's last prompt continues it; each later turn's time after
the turn before's recorded end."""

from __future__ import annotations

import pytest

from loadtests.logs.conversations import Conversations
from loadtests.logs.log_record import LogRecord
from tests.traces import MOONCAKE, trace
from tests.unit.loadtests.logs.reading import jsonl, read, records


def mooncake(tmp_path, rows):
    """A trace in Mooncake's format: (ms, hash_ids) each, 512 tokens a block."""
    lines = [
        {"timestamp": t, "input_length": 512 * len(ids) or 100, "output_length": 20, "hash_ids": ids} for t, ids in rows
    ]
    return jsonl(tmp_path, lines)


def test_a_row_extending_a_conversations_last_prompt_continues_it(tmp_path):
    rows = [
        (0, [1, 2]),  # A, turn 1
        (500, [7]),  # B, turn 1
        (4000, [1, 2, 3, 4]),  # A, turn 2: A's history, then more
        (4500, [7, 8]),  # B, turn 2
        (9000, [1, 2, 3, 4, 5]),  # A, turn 3
        (9100, [1, 2, 9]),  # extends A's first prompt, no longer its last: a conversation of its own
        (9200, [1, 2, 3, 4, 5]),  # A's last prompt again, not longer: another of its own
        (9300, []),  # no blocks: no conversation
    ]
    recs, problems = read(mooncake(tmp_path, rows))
    assert problems.total == 0
    a, b = recs[0].session, recs[1].session
    assert [(r.session, r.turn) for r in recs] == [
        (a, 1),
        (b, 1),
        (a, 2),
        (b, 2),
        (a, 3),
        (recs[5].session, 1),
        (recs[6].session, 1),
        (None, None),
    ]
    assert len({a, b, recs[5].session, recs[6].session}) == 4
    assert {r.user for r in recs[:7] if r.session == a} == {"h1"}  # a split keeps it on one side
    # the log has no end times: each turn's time after the one before is from that one's start
    assert [r.after for r in recs[:5]] == [None, None, pytest.approx(4.0), pytest.approx(4.0), pytest.approx(5.0)]


def test_a_logs_own_sessions_count_turns_and_the_time_after_each_recorded_end():
    row = {"user_id": "u", "input_tokens": 8, "output_tokens": 2}
    recs = list(
        records(
            [
                {**row, "ts": 100.0, "session_id": "s", "response": {"status": 200, "e2e_ms": 1500}},
                {**row, "ts": 101.0, "session_id": "t"},
                {**row, "ts": 104.0, "session_id": "s", "response": {"status": 200, "e2e_ms": 800}},
                {**row, "ts": 105.0, "session_id": "s"},
                {**row, "ts": 106.0},
            ]
        )
    )
    assert [(r.session, r.turn) for r in recs] == [("s", 1), ("t", 1), ("s", 2), ("s", 3), (None, None)]
    # 104 - (100 + 1.5), 105 - (104 + 0.8): from the end the log recorded
    assert [r.after for r in recs] == [None, None, pytest.approx(2.5), pytest.approx(0.2), None]


def test_only_the_latest_conversations_are_followed():
    conv = Conversations(keep=2)
    recs = [LogRecord(n, float(n), "u", hash_ids=ids) for n, ids in enumerate([(1,), (2,), (3,), (1, 9), (3, 9)], 1)]
    for r in recs:
        conv.place(r)
    assert [r.turn for r in recs] == [1, 1, 1, 1, 2]  # (1,)'s conversation was forgotten for (3,)'s
    assert recs[4].session == recs[2].session


def test_the_shared_mooncake_sample_holds_no_conversation():
    """The sample in ../shared/traces is Mooncake's synthetic trace, not its conversation trace: no
    row resends another's whole prompt, so each is a conversation of one turn."""
    recs, _ = read(trace(MOONCAKE))
    assert {r.turn for r in recs} == {1}
    assert len({r.session for r in recs}) == len(recs)
