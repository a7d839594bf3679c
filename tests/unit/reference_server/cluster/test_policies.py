"""The router's policies over replicas that are only records: order, ties, the prefix index."""

from __future__ import annotations

import json

from reference_server.cluster.policies import BLOCK_CHARS, LeastLoaded, Prefix, RoundRobin, blocks, prompt_text
from reference_server.cluster.supervisor import Replica


def replicas(n: int) -> list[Replica]:
    return [Replica(i, "mixed", [], port=9000 + i) for i in range(n)]


def test_round_robin_takes_each_first_in_turn_and_the_rest_after():
    rs, policy = replicas(3), RoundRobin()
    orders = [[r.index for r in policy.order(rs, "")] for _ in range(4)]
    assert orders == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]


def test_least_loaded_takes_the_fewest_in_flight_and_spreads_ties():
    rs, policy = replicas(3), LeastLoaded()
    rs[0].in_flight, rs[1].in_flight, rs[2].in_flight = 2, 0, 1
    assert [r.index for r in policy.order(rs, "")] == [1, 2, 0]
    for r in rs:
        r.in_flight = 0
    assert {policy.order(rs, "")[0].index for _ in range(3)} == {0, 1, 2}


def test_prefix_sends_a_prompt_where_its_longest_prefix_went():
    rs, policy = replicas(2), Prefix(2)
    history = "h" * (3 * BLOCK_CHARS)
    rs[0].in_flight = 5  # the holder wins over load
    policy.sent(rs[0], history + "first turn")
    assert policy.order(rs, history + "second turn")[0].index == 0
    assert policy.holder(history) == (0, 3)
    assert policy.order(rs, "another conversation entirely, long enough to fill a block or two")[0].index == 1


def test_prefix_holder_is_among_the_candidates_only_and_forgotten_when_its_replica_is_lost():
    rs, policy = replicas(2), Prefix(2)
    prompt = "p" * (2 * BLOCK_CHARS)
    policy.sent(rs[1], prompt)
    assert policy.order([rs[0]], prompt)[0].index == 0  # the holder is down: no candidate
    assert policy.holder(prompt, {0}) == (None, 0)
    policy.forget(1)
    assert policy.holder(prompt) == (None, 0)


def test_prefix_index_is_bounded():
    policy = Prefix(1)
    policy._capacity = 4
    r = replicas(1)[0]
    for n in range(3):
        policy.sent(r, str(n) * (2 * BLOCK_CHARS))
    assert len(policy._where) == 4
    assert policy.holder("0" * (2 * BLOCK_CHARS)) == (None, 0)  # the oldest went first


def test_blocks_are_chained_so_equal_blocks_after_different_ones_differ():
    a, b = blocks("x" * BLOCK_CHARS + "y" * BLOCK_CHARS), blocks("z" * BLOCK_CHARS + "y" * BLOCK_CHARS)
    assert len(a) == len(b) == 2
    assert a[1] != b[1]
    assert blocks("short") == []


def test_prompt_text_reads_each_api_in_order():
    chat = {
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text", "text": "U"}]}]
    }
    gemini = {"systemInstruction": {"parts": [{"text": "S"}]}, "contents": [{"role": "user", "parts": [{"text": "U"}]}]}
    assert prompt_text(json.dumps(chat).encode()) == "SU"
    assert prompt_text(json.dumps(gemini).encode()) == "SU"
    assert prompt_text(json.dumps({"prompt": ["P"]}).encode()) == "P"
    assert prompt_text(b"not json") == prompt_text(b"[1]") == prompt_text(b'{"messages": [1, null]}') == ""
