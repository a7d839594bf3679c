"""The synthetic log: deterministic, at the asked rate with its daily swing, users keeping their
language, sessions whose turns repeat the conversation so far, readable by the replay's reader."""

import io
import itertools
import statistics
from collections import Counter, defaultdict

import orjson

from llmchaos import tokenizer
from loadtests.logs import formats, jsonl, synth
from loadtests.logs.lines import Lines
from loadtests.logs.problems import Problems
from loadtests.logs.split import LangMix


def records(spec):
    data = b"".join(orjson.dumps(line) + b"\n" for line in synth.lines(spec))
    problems = Problems("synth")
    recs = list(formats.checked(jsonl.rows(Lines(io.BytesIO(data), "synth"), {}), problems))
    assert problems.total == 0
    return recs


def test_deterministic_for_a_seed():
    spec = synth.Spec(duration=60, rate=3, seed=4)
    assert list(synth.lines(spec)) == list(synth.lines(spec))
    assert list(synth.lines(spec)) != list(synth.lines(synth.Spec(duration=60, rate=3, seed=5)))


def test_rate_and_its_daily_swing():
    flat = records(synth.Spec(duration=3600, rate=4, diurnal=0, tokens_only=True))
    assert abs(len(flat) / 3600 - 4) < 0.2
    swing = records(synth.Spec(duration=3600, rate=4, diurnal=0.5, period=3600, tokens_only=True))
    first_half = sum(r.offset < 1800 for r in swing)
    # rate * (1 + 0.5 sin): the half with the sine above zero has (1 + 1/pi) / (1 - 1/pi) = 1.93 times more
    assert 1.6 < first_half / (len(swing) - first_half) < 2.3
    assert all(a.offset <= b.offset for a, b in itertools.pairwise(swing))


def test_users_keep_their_language_and_sessions_repeat_the_conversation():
    recs = records(synth.Spec(duration=900, rate=3, think=5, sessions=0.5, mix=LangMix.parse("en=1,ja=1")))
    by_user = defaultdict(set)
    for r in recs:
        by_user[r.user].add(r.lang)
    assert all(len(langs) == 1 for langs in by_user.values())
    assert set(Counter(r.lang for r in recs)) == {"en", "ja"}
    sessions = defaultdict(list)
    for r in recs:
        if r.session:
            sessions[r.session].append(r)
    long = [turns for turns in sessions.values() if len(turns) >= 3]
    assert long
    for turns in long:
        for before, after in itertools.pairwise(turns):
            msgs = after.body["messages"]
            assert msgs[: len(before.body["messages"])] == before.body["messages"]  # the history, as a prefix
            assert msgs[len(before.body["messages"])]["role"] == "assistant"
            assert tokenizer.count(msgs[len(before.body["messages"])]["content"]) == before.output_tokens
    assert abs(len(recs) / 900 - 3) < 0.3  # the rate counts every turn
    singles = [r for r in recs if not r.session]
    assert 0.2 < len(singles) / len(recs) < 0.3  # half the conversations, of one turn against three on average


def test_lengths_follow_the_medians():
    recs = records(synth.Spec(duration=600, rate=5, sessions=0, input_median=300, output_median=80))
    ins = [tokenizer.count(r.body["messages"][-1]["content"]) for r in recs]
    assert 250 < statistics.median(ins) < 350
    assert 65 < statistics.median(r.output_tokens for r in recs) < 95
    assert all(r.body["max_tokens"] == r.output_tokens for r in recs)
