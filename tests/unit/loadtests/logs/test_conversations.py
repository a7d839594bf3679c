"""Each record's place in its conversation (loadtests/logs/conversations.py): a log's own session ids
counted in turns; in a trace of prompt blocks (Mooncake's), a row whose blocks begin with every whole
block of an earlier conversation's last prompt, and that outgrows it, continues it; each later
turn's time after the turn before's recorded end."""

from __future__ import annotations

import itertools

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
    assert {r.user for r in recs[:7] if r.session == a} == {"h1"}  # its prefix family
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


def test_a_turn_resends_its_historys_whole_blocks_the_last_one_hashed_anew(tmp_path):
    """As Mooncake's conversation trace has it: every prompt opens with one shared block (0); the
    turn before's last block was cut short, so the next turn's (whole now) has a new id."""
    rows = [
        {"timestamp": 0, "input_length": 1300, "output_length": 300, "hash_ids": [0, 1, 2]},  # A: 0, 1 whole
        {"timestamp": 10, "input_length": 700, "output_length": 50, "hash_ids": [0, 5]},  # B: only 0 whole
        {"timestamp": 3000, "input_length": 1800, "output_length": 200, "hash_ids": [0, 1, 3, 4]},  # A, 2
        {
            "timestamp": 3100,
            "input_length": 900,
            "output_length": 30,
            "hash_ids": [0, 6],
        },  # C: B's whole block, 0, opens every prompt
        # A's history, but shorter than A's turn 2: not its next turn
        {"timestamp": 3200, "input_length": 1500, "output_length": 99, "hash_ids": [0, 1, 3, 7]},
        {"timestamp": 9000, "input_length": 2400, "output_length": 40, "hash_ids": [0, 1, 3, 4, 8]},  # A, 3
    ]
    recs, problems = read(jsonl(tmp_path, rows))
    assert problems.total == 0
    a = recs[0].session
    assert [(r.session == a, r.turn) for r in recs] == [
        (True, 1),
        (False, 1),
        (True, 2),
        (False, 1),
        (False, 1),
        (True, 3),
    ]
    assert len({r.session for r in recs}) == 4
    assert recs[5].after == pytest.approx(6.0)


def test_the_shared_mooncake_sample_chains_its_multi_turn_conversations():
    """Mooncake's synthetic trace keeps the order of its datasets' multi-turn conversations: each turn
    found resends its history's whole blocks and outgrows it by half the answer, in the log's order."""
    recs, _ = read(trace(MOONCAKE))
    turns: dict[str | None, list[LogRecord]] = {}
    for r in recs:
        turns.setdefault(r.session, []).append(r)
    chained = [rs for rs in turns.values() if len(rs) > 1]
    assert sum(len(rs) - 1 for rs in chained) > 100, len(chained)
    for rs in chained:
        assert [r.turn for r in rs] == list(range(1, len(rs) + 1))
        for prev, r in itertools.pairwise(rs):
            assert prev.input_tokens is not None
            assert r.input_tokens is not None
            whole = prev.hash_ids[: prev.input_tokens // prev.block_tokens]
            assert whole
            assert r.hash_ids[: len(whole)] == whole
            assert r.input_tokens >= prev.input_tokens + (prev.output_tokens or 0) / 2
            assert r.ts >= prev.ts
