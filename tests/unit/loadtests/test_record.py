import threading

import gevent
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchaos import tokenizer
from loadtests.record import OFF_LOOP_CHARS, RequestRecord


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
    assert r.itl_spread() == ([0.1, 0.2], [1, 1])
    assert r.tpot() == pytest.approx((0.4 - 0.1) / 2)


def test_merged_chunks_spread_their_gap_over_their_tokens():
    r = rec(chunks=[" a", " b c d e"], gaps=[0.4], usage_tokens=5)
    values, times = r.itl_spread()
    assert (values, times) == (pytest.approx([0.1]), [4])  # a gap that delivered 4 tokens is 4 ITL samples
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
    ok = rec(chunks=["The", " cat"], usage_tokens=n + 1).line()  # off by one: normal, not flagged
    assert ok.own_tokens == n
    assert not ok.tokens_disagree
    bad = rec(chunks=["The", " cat"], usage_tokens=40).line()
    assert bad.tokens_disagree
    assert bad.output_tokens == 40
    no_usage = rec(chunks=["The", " cat"], usage_tokens=None)
    assert no_usage.output_tokens == n


# Chunks of several tokens, some with characters our tokenizer spells in byte-fallback tokens.
VLLM_LIKE = [" The", " quick brown", " fox 🦊", " jumps", " über 狐狸", " 🙂🙂", " den", " Hund."]


@pytest.mark.parametrize("usage", [8, 11, 14, 23, 40])
def test_per_chunk_tokens_sum_exactly_to_the_usage_and_itl_has_one_sample_per_token(usage):
    r = rec(chunks=VLLM_LIKE, gaps=[0.01 * (i + 1) for i in range(7)], usage_tokens=usage)
    per = r.tokens_per_chunk()
    assert all(isinstance(k, int) and k >= 1 for k in per), per
    assert sum(per) == usage
    values, times = r.itl_spread()
    assert sum(times) == usage - per[0]
    assert sum(v * k for v, k in zip(values, times, strict=True)) == pytest.approx(sum(r.gaps))
    assert r.line().tokens_from == "usage"


def test_per_chunk_tokens_follow_our_tokenizer_when_it_agrees_with_the_usage():
    counts = tokenizer.count_batch(VLLM_LIKE)
    r = rec(chunks=VLLM_LIKE, gaps=[0.1] * 7, usage_tokens=sum(counts))
    assert r.tokens_per_chunk() == counts


def test_without_usage_our_count_is_used_and_said():
    r = rec(chunks=VLLM_LIKE, gaps=[0.1] * 7, usage_tokens=None)
    own = tokenizer.count(r.text)
    assert r.output_tokens == own
    assert sum(r.tokens_per_chunk()) == own
    assert r.line().tokens_from == "tokenizer"


def test_fewer_tokens_than_chunks_is_one_per_chunk():
    r = rec(chunks=[" a", " b", " c"], gaps=[0.1, 0.2], usage_tokens=2)
    assert r.tokens_per_chunk() == [1, 1, 1]
    assert r.itl_spread() == ([0.1, 0.2], [1, 1])


def test_a_huge_text_is_counted_off_the_event_loop():
    """Counting a long text takes a while: the event loop (every other stream in flight) goes on
    meanwhile (a 20 MB event stopped the whole generator for 10 s)."""
    r = rec(chunks=[" a", " lorem" * 200_000, " b"], gaps=[0.1, 0.1], usage_tokens=None)
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        while True:
            gevent.sleep(0.0005)
            ticks += 1

    ticker = gevent.spawn(tick)
    gevent.sleep(0.01)
    before = ticks
    assert r.output_tokens > 200_000
    during = ticks - before
    ticker.kill()
    assert during > 0


@pytest.mark.fuzz
@given(
    chunks=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=12),
    extra=st.integers(min_value=0, max_value=60),
)
def test_any_chunks_share_out_the_usage_exactly(chunks, extra):
    usage = len(chunks) + extra
    r = rec(chunks=chunks, gaps=[0.05] * (len(chunks) - 1), usage_tokens=usage)
    per = r.tokens_per_chunk()
    assert min(per) >= 1
    assert sum(per) == usage
    assert sum(r.itl_spread()[1]) == usage - per[0]


def test_thinking_counts_in_the_output_and_apart():
    """Without a server count of the thinking, ours of the thinking text; within the output tokens."""
    thinking = {0: len(" hmm let"), 1: len(" me see")}
    r = rec(chunks=[" hmm let", " me see", " yes"], usage_tokens=None, thinking=thinking, ttfa=0.4)
    assert r.thought == " hmm let me see"
    assert r.reasoning_tokens == tokenizer.count(" hmm let me see")
    assert r.output_tokens == tokenizer.count(" hmm let me see yes")
    samples = r.samples()
    assert (samples["ttft"], samples["ttfa"], samples["reasoning_tokens"]) == ([0.1], [0.4], [r.reasoning_tokens])
    line = r.line()
    assert (line.ttfa, line.reasoning_tokens) == (0.4, r.reasoning_tokens)


def test_the_servers_count_of_thinking_wins_and_no_thinking_is_none():
    r = rec(thinking={0: 2}, usage_tokens=3, usage_reasoning=1)
    assert r.reasoning_tokens == 1
    assert not r.counted  # nothing of ours needed
    plain = rec()
    assert plain.reasoning_tokens is None
    assert "reasoning_tokens" not in plain.samples()
    assert plain.line().reasoning_tokens is None


def test_thinking_counted_but_never_streamed_is_output_and_no_gap_s():
    # defect 9 of issue 34: Gemini without includeThoughts counts its hidden thoughts in usage, and the
    # answer's gaps were spread over them too: ITL and TPOT about half the truth
    r = rec(usage_tokens=3 + 12, usage_reasoning=12)  # three answer events, twelve thoughts unseen
    assert (r.output_tokens, r.reasoning_tokens, r.unstreamed, r.streamed_tokens) == (15, 12, 12, 3)
    assert r.tokens_per_chunk() == [1, 1, 1]
    assert r.itl_spread() == ([0.1, 0.2], [1, 1])  # each gap delivered one token
    assert r.tpot() == pytest.approx(0.3 / 2)
    line = r.line()
    assert (line.output_tokens, line.unstreamed_tokens, line.tokens_disagree) == (15, 12, False)
    shown = rec(usage_tokens=15, usage_reasoning=12, thinking={0: 2})  # thinking streamed: every token an event's
    assert (shown.unstreamed, shown.streamed_tokens) == (0, 15)


@pytest.mark.parametrize("usage", [None, 7])
def test_counting_given_up_at_the_stop_cuts_the_request_at_the_stop(usage):
    stop = threading.Event()
    stop.set()
    long = [" lorem" * (2 * OFF_LOOP_CHARS // 6), " ipsum"]  # long: counted off the loop, so given up
    r = rec(chunks=long, gaps=[0.1], usage_tokens=usage)
    r.count_tokens(stop)
    assert (r.outcome, r.at_stop, r.uncounted) == ("cancelled", True, True)
    assert r.error == f"test stopped before its {len(''.join(long)):,} characters were counted (ended ok)"
    line = r.line()
    assert line.problem() is None
    assert (line.outcome, line.at_stop, line.own_tokens, line.tokens_per_event) == ("cancelled", True, 0, None)
    assert (line.tokens_from, line.output_tokens) == (("usage", 7) if usage else (None, 0))
    assert r.samples() == {}  # apart from the requests issued


def test_a_short_text_is_counted_even_at_the_stop():
    stop = threading.Event()
    stop.set()
    r = rec(chunks=VLLM_LIKE, gaps=[0.1] * 7, usage_tokens=None, outcome="cancelled", at_stop=True)
    r.count_tokens(stop)
    assert not r.uncounted
    assert r.line().output_tokens == tokenizer.count(r.text)
