"""`logs stats`: rate over time, language mix, users, length percentiles of a log, in bounded memory."""

import io

import orjson

from loadtests.logs import formats, jsonl, stats
from loadtests.logs.lines import Lines
from loadtests.logs.problems import Problems
from loadtests.logs.split import LangMix


def gathered(lines, mix="en=1"):
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    problems = Problems("log")
    recs = formats.checked(jsonl.rows(Lines(io.BytesIO(data), "log"), {}), problems)
    return stats.gather(recs, LangMix.parse(mix)).to_json(problems)


def test_rate_per_minute_mix_and_lengths():
    lines = [
        {"ts": t, "user_id": f"u{t % 7}", "lang": "de" if t % 3 else None, "input_tokens": 100 + t, "output_tokens": 10}
        for t in range(0, 180, 2)
    ]
    lines[5]["lang"] = None
    data = gathered([{k: v for k, v in line.items() if v is not None} for line in lines] + ["oops"])
    assert data["requests"] == 90
    assert data["per_minute"] == [[0, 30], [1, 30], [2, 30]]
    assert data["langs"]["de"] + data["langs"]["en"] == 90
    assert data["langs_assigned"] == data["langs"]["en"] == 30 + (5 % 3 != 0)
    assert data["users"] == 7
    assert data["input_tokens"]["max"] == 278
    assert data["output_tokens"] == {"p50": 10, "p90": 10, "p99": 10, "max": 10}
    assert data["problems"]["counts"] == {"not_json": 1}
    text = stats.render("log", "llmchaos", data)
    assert "90 requests over 178s" in text
    assert "skipped: not_json: 1 (lines 91)" in text


def test_distinct_counts_exactly_then_estimates():
    d = stats.Distinct()
    for i in range(1000):
        d.add(f"k{i}")
        d.add(f"k{i}")
    assert d.count == 1000
    for i in range(1000, 60_000):
        d.add(f"k{i}")
    assert abs(d.count / 60_000 - 1) < 0.1


def test_body_text_of_each_api():
    assert stats.body_text({"messages": [{"content": "a"}, {"content": [{"type": "text", "text": "b"}]}]}) == "ab"
    assert stats.body_text({"prompt": ["x", 3]}) == "x"
    assert stats.body_text({"contents": [{"parts": [{"text": "y"}, {"inline": 1}]}]}) == "y"
