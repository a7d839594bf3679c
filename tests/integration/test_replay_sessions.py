"""A conversation trace in Mooncake's format replayed as sessions against two reference servers split
A/B. As in Mooncake's conversation trace, every prompt opens with one shared block (0) and each turn's
hash_ids begin with the turn before's whole blocks (its last one, cut short, whole now and hashed
anew). Every turn of a conversation goes to one side, in order, each sent the log's time after the
turn before ended (`--session-order after-end`), each from the second on finding the turn before's
whole blocks in that server's prefix cache; requests.jsonl's session and turn, and the per-turn TTFT
histograms, as a generated conversation's."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

from loadtests.logs.split import side
from tests.integration.replay_helpers import replay, sides
from tests.procs import serve

SPEED = 4.0
TURNS = 4
BLOCK = 512
CONVERSATIONS = 8


def tokens(turn: int) -> int:
    """A turn's prompt (0: the first): its history and a new message, never a whole number of blocks."""
    return 1300 + 600 * turn


def trace(path) -> list[str]:
    """CONVERSATIONS conversations of TURNS turns, 2 s apart in the trace and 0.3 s apart from each
    other; the session ids the replay gives them (the prefix family, h0, and the first turn's line)."""
    rows, fresh = [], itertools.count(1)
    for i in range(CONVERSATIONS):
        ids = [0]
        for turn in range(TURNS):
            n = tokens(turn)
            ids = ids[: tokens(turn - 1) // BLOCK] if turn else ids  # the turn before's whole blocks
            ids += [next(fresh) for _ in range(-(-n // BLOCK) - len(ids))]
            rows.append((300 * i + 2000 * turn, i, n, list(ids)))
    rows.sort()
    path.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": n, "output_length": 6, "hash_ids": ids}) + "\n"
            for t, _, n, ids in rows
        )
    )
    firsts = {i: line for line, (_, i, _, _) in reversed(list(enumerate(rows, 1)))}
    return [f"h0/{firsts[i]}" for i in range(CONVERSATIONS)]


def test_a_conversation_trace_replays_as_sessions_each_whole_on_one_side(tmp_path):
    log = tmp_path / "conversations.jsonl"
    on = {"a": set(), "b": set()}  # the split sends each conversation whole, by its session id
    for session in trace(log):
        on[side(session, 50)].add(session)
    assert on["a"]
    assert on["b"]
    with (
        serve("--sim-time-scale", "0.2", "--enable-prompt-tokens-details") as a,
        serve("--sim-time-scale", "0.2", "--enable-prompt-tokens-details") as b,
    ):
        proc = replay(
            "--log", str(log), "--target-a", a.url, "--target-b", b.url, "--split", "50", "--speed", str(SPEED),
            "--session-order", "after-end", "--results-dir", str(tmp_path / "results"),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = sides(tmp_path / "results")
    seen: dict[str, str] = {}
    for name, s in out.items():
        sessions: dict[str, list[dict]] = defaultdict(list)
        for r in s.requests:
            assert r["outcome"] == "ok", r
            assert r["session"] == r["replay"]["session_id"]
            assert seen.setdefault(r["session"], name) == name  # a conversation never on both sides
            sessions[r["session"]].append(r)
        assert {r["replay"]["user_id"] for r in s.requests} == {"h0"}  # one prefix family, split by conversation
        assert set(sessions) == on[name]
        for turns in sessions.values():
            turns.sort(key=lambda r: r["sent"])
            assert [r["turn"] for r in turns] == list(range(1, TURNS + 1))
            for prev, r in itertools.pairwise(turns):
                # the trace has no end times: the log's 2 s from the turn before's start, sped up, after its end
                assert r["sent"] >= prev["intended"] + prev["e2e"] + 2.0 / SPEED - 0.005, (prev, r)
                # its history, the turn before's whole blocks: found in the prefix cache of the server it went to
                assert prev["prompt_tokens"] // BLOCK * BLOCK - 16 <= r["cached_tokens"] < prev["prompt_tokens"]
        counts: dict[str, int] = defaultdict(int)  # over the languages the mix gave the users
        for m in s.run["summaries"]:
            counts[m["metric"]] += m["count"] if m["phase"] == "baseline" else 0
        assert counts["ttft_turn_1"] == len(on[name])
        assert counts["ttft_turn_2-3"] == 2 * len(on[name])
        assert counts["ttft_turn_4-7"] == len(on[name])
    assert len(seen) == CONVERSATIONS
