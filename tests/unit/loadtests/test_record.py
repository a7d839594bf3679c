import pytest

from llmchaos import tokenizer
from loadtests.record import RequestRecord


def rec(**kw) -> RequestRecord:
    base = {
        "lang": "en",
        "api": "openai-chat",
        "target": "t",
        "intended": 100.0,
        "sent": 100.0,
        "ttft": 0.1,
        "e2e": 0.4,
        "gaps": [0.1, 0.2],
        "chunks": [" a", " b", " c"],
        "usage_tokens": 3,
    }
    return RequestRecord(**{**base, **kw})


def test_one_token_per_chunk_gives_gaps_as_itl():
    r = rec()
    assert r.itl() == [0.1, 0.2]
    assert r.tpot() == pytest.approx((0.4 - 0.1) / 2)


def test_merged_chunks_spread_their_gap_over_their_tokens():
    r = rec(chunks=[" a", " b c d e"], gaps=[0.4], usage_tokens=5)
    assert r.itl() == pytest.approx([0.1] * 4)  # a gap that delivered 4 tokens is 4 ITL samples
    assert r.tpot() == pytest.approx(0.3 / 4)


def test_failed_request_adds_no_latency_but_open_loop_lag_is_kept():
    r = rec(outcome="truncated", open_loop=True, intended=100.0, sent=100.25)
    assert r.samples() == {"schedule_lag": [0.25]}


def test_open_loop_keeps_both_origins():
    r = rec(open_loop=True, intended=100.0, sent=100.5, ttft=0.7, e2e=1.0)
    s = r.samples()
    assert s["ttft"] == [0.7]
    assert s["ttft_sent"] == pytest.approx([0.2])
    assert s["e2e_sent"] == pytest.approx([0.5])
    assert s["schedule_lag"] == pytest.approx([0.5])


def test_usage_disagreement_is_flagged():
    n = tokenizer.count("The cat")
    ok = rec(chunks=["The", " cat"], usage_tokens=n + 1).line(n)  # off by one: normal, not flagged
    assert ok.own_tokens == n
    assert not ok.tokens_disagree
    bad = rec(chunks=["The", " cat"], usage_tokens=40).line(n)
    assert bad.tokens_disagree
    assert bad.output_tokens == 40
    no_usage = rec(chunks=["The", " cat"], usage_tokens=None)
    assert no_usage.output_tokens == n
