"""A conversation trace in Mooncake's format (each turn's hash_ids its history's, then more) replayed
as sessions against two reference servers split A/B: every turn of a conversation on one side, in
order, each sent the log's time after the turn before ended (`--session-order after-end`), each from
the second on finding the conversation in that server's prefix cache; requests.jsonl's session and
turn, and the per-turn TTFT histograms, as a generated conversation's."""

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


def trace(path, conversations: list[int]) -> dict[int, list[float]]:
    """Each conversation (its first block's id) of TURNS turns, 2 s apart in the trace and 0.3 s
    apart from each other, each turn one block more than the turn before; their turns' offsets."""
    rows, offsets = [], {}
    for i, first in enumerate(conversations):
        ids, at = [first], []
        for turn in range(TURNS):
            t = 300 * i + 2000 * turn
            rows.append((t, list(ids)))
            at.append(t / 1000)
            ids.append(first * 100 + turn)
        offsets[first] = at
    rows.sort()
    path.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": BLOCK * len(ids), "output_length": 6, "hash_ids": ids}) + "\n"
            for t, ids in rows
        )
    )
    return offsets


def test_a_conversation_trace_replays_as_sessions_each_whole_on_one_side(tmp_path):
    on = {"a": [], "b": []}  # conversations whose user (h + first block) the split sends to each side
    for first in range(1, 200):
        s = side(f"h{first}", 50)
        if len(on[s]) < 3:
            on[s].append(first)
    log = tmp_path / "conversations.jsonl"
    trace(log, on["a"] + on["b"])
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
        assert {r["replay"]["user_id"] for r in s.requests} == {f"h{f}" for f in on[name]}
        assert len(sessions) == 3
        for turns in sessions.values():
            turns.sort(key=lambda r: r["sent"])
            assert [r["turn"] for r in turns] == list(range(1, TURNS + 1))
            for prev, r in itertools.pairwise(turns):
                # the trace has no end times: the log's 2 s from the turn before's start, sped up, after its end
                assert r["sent"] >= prev["intended"] + prev["e2e"] + 2.0 / SPEED - 0.005, (prev, r)
                # its history was the turn before's prompt: found in the prefix cache of the server it went to
                assert r["cached_tokens"] >= prev["prompt_tokens"] - 2 * 16, (prev, r)
        counts: dict[str, int] = defaultdict(int)  # over the languages the mix gave the users
        for m in s.run["summaries"]:
            counts[m["metric"]] += m["count"] if m["phase"] == "baseline" else 0
        assert counts["ttft_turn_1"] == 3
        assert counts["ttft_turn_2-3"] == 6
        assert counts["ttft_turn_4-7"] == 3
    assert len(seen) == 6
