"""Every log format read on real data and on lines written as their sources publish them: records,
offsets, users, what each format carries; telling formats apart; bad lines counted by kind with
their line numbers, or (strict) the first as FILE:LINE: field: message."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from llmchaos.errors import UsageError
from loadtests.logs import formats
from loadtests.logs.problems import Problems
from tests.traces import AZURE, MOONCAKE, trace


def read(path, fmt="auto", columns=None, strict=False):
    problems = Problems(str(path), strict)
    return list(formats.source(path, fmt, columns).read(problems)), problems


def jsonl(tmp_path, rows, name="log.jsonl"):
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return p


def test_azure_trace_every_row_with_its_tokens_and_offset():
    recs, problems = read(trace(AZURE))
    assert formats.source(AZURE).module().NAME == "azure"
    assert problems.total == 0
    assert len(recs) == len(AZURE.read_text().splitlines()) - 1  # every row after the header
    first = recs[0]
    assert (first.line, first.input_tokens, first.output_tokens, first.offset) == (2, 374, 44, 0.0)
    # 2023-11-16 18:15:50.9951690 is 4.314579 s after 18:15:46.6805900 (seven fractional digits)
    assert recs[1].offset == pytest.approx(4.314579, abs=1e-6)
    assert len({r.user for r in recs}) == len(recs)  # no users in the trace: each request its own
    assert all(r.lang is None and r.api is None and r.body is None for r in recs)


def test_mooncake_trace_hash_ids_and_prefix_users():
    recs, problems = read(trace(MOONCAKE))
    assert formats.source(MOONCAKE).module().NAME == "mooncake"
    assert problems.total == 0
    raw = [json.loads(line) for line in MOONCAKE.read_text().splitlines()]
    assert len(recs) == len(raw)
    for rec, row in zip(recs[:500], raw, strict=False):
        assert rec.offset == pytest.approx(row["timestamp"] / 1000)
        assert (rec.input_tokens, rec.output_tokens, list(rec.hash_ids)) == (
            row["input_length"],
            row["output_length"],
            row["hash_ids"],
        )
        assert rec.block_tokens == 512
        assert rec.user == f"h{row['hash_ids'][0]}"  # a prefix family is one user


def test_burstgpt_csv_as_published(tmp_path):
    p = tmp_path / "BurstGPT_1.csv"
    p.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,GPT-4,1087,0,1087,API log\n"
        "118,ChatGPT,417,216,633,Conversation log\n"
    )
    recs, problems = read(p)
    assert problems.total == 0
    assert [(r.offset, r.model, r.input_tokens, r.output_tokens) for r in recs] == [
        (0.0, "ChatGPT", 472, 18),
        (40.0, "GPT-4", 1087, 0),
        (113.0, "ChatGPT", 417, 216),
    ]


def test_azure_2024_timestamps_with_a_zone(tmp_path):
    p = tmp_path / "AzureLLMInferenceTrace_code_1week.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:00.009930+00:00,2162,5\n"
        "2024-05-10 00:00:01.509930+00:00,3026,11\n"
    )
    recs, _ = read(p)
    assert [r.offset for r in recs] == [0.0, 1.5]


def test_our_jsonl_with_bodies_and_with_token_counts(tmp_path):
    p = jsonl(
        tmp_path,
        [
            {
                "ts": "2024-03-01T10:00:00Z",
                "user_id": "u1",
                "session_id": "s1",
                "lang": "de",
                "api": "openai-chat",
                "model": "m",
                "request": {"messages": [{"role": "user", "content": "Hallo"}], "max_tokens": 30},
                "response": {"status": 200, "ttft_ms": 80.5, "e2e_ms": 900, "output_tokens": 27},
            },
            {"ts": 1709287200.25, "user_id": 7, "input_tokens": 1000, "output_tokens": 50, "hash_ids": [1, 2]},
        ],
    )
    (a, b), problems = read(p)
    assert problems.total == 0
    assert (a.user, a.session, a.lang, a.api, a.model, a.output_tokens) == ("u1", "s1", "de", "openai-chat", "m", 27)
    assert a.body == {"messages": [{"role": "user", "content": "Hallo"}], "max_tokens": 30}
    assert (a.response.ttft_ms, a.response.e2e_ms) == (80.5, 900.0)
    assert (b.offset, b.user, b.input_tokens, b.hash_ids, b.block_tokens) == (0.25, "7", 1000, (1, 2), 512)


def test_gateway_logs_with_mapped_columns(tmp_path):
    openai = jsonl(
        tmp_path,
        [
            {
                "time": 100.0,
                "meta": {"uid": "alice"},
                "req": {"model": "gpt", "messages": [], "metadata": {"lang": "ja"}},
            },
            {"time": 100.5, "meta": {}, "req": {"model": "gpt", "prompt": "hi", "user": "bob"}},
            {"time": 101.0, "meta": {}, "req": {"model": "gpt", "prompt": "hi"}},
        ],
    )
    cols = {"ts": "time", "user": "meta.uid", "body": "req"}
    recs, problems = read(openai, "openai-log", cols)
    assert problems.total == 0
    assert [(r.offset, r.user, r.api, r.lang) for r in recs] == [
        (0.0, "alice", "openai-chat", "ja"),
        (0.5, "bob", "openai-completions", None),  # the body's own user field
        (1.0, "r3", "openai-completions", None),  # nobody: the request is its own user
    ]
    gemini = jsonl(
        tmp_path,
        [{"timestamp": "2024-01-01 00:00:00", "user": "u", "body": {"contents": [], "labels": {"lang": "zh"}}}],
        "gemini.jsonl",
    )
    (rec,), _ = read(gemini)
    assert formats.source(gemini).module().NAME == "gemini-log"
    assert (rec.api, rec.lang) == ("gemini", "zh")


def test_every_kind_of_bad_line_is_counted_with_its_line_number(tmp_path):
    good = {"ts": 10, "user_id": "u", "input_tokens": 5}
    p = jsonl(
        tmp_path,
        [
            good,  # 1
            "not json at all",  # 2
            "[1, 2]",  # 3
            {"user_id": "u", "input_tokens": 5},  # 4: no ts
            {**good, "input_tokens": -1},  # 5
            {**good, "lang": "xx"},  # 6
            {**good, "api": "soap"},  # 7
            {**good, "ts": 9},  # 8: back in time
            {**good, "ts": 11},  # 9
            "",  # blank lines are skipped silently
            {**good, "ts": "yesterday"},  # 11
        ],
    )
    recs, problems = read(p)
    assert [r.line for r in recs] == [1, 9]
    assert dict(problems.counts) == {
        "not_json": 2,
        "missing_field": 1,
        "bad_value": 2,
        "unknown_lang": 1,
        "unknown_api": 1,
        "backwards": 1,
    }
    assert [e["line"] for e in problems.examples["not_json"]] == [2, 3]
    assert problems.examples["missing_field"] == [{"line": 4, "field": "ts", "error": "missing"}]
    assert problems.examples["bad_value"][0]["field"] == "input_tokens"
    assert "backwards: 1 (lines 8)" in problems.lines()

    with pytest.raises(UsageError) as e:
        read(p, strict=True)
    assert str(e.value) == f"{p}:2: line: not JSON: invalid literal, expected 'null': line 1 column 1 (char 0)"


def test_a_csv_without_its_columns_is_an_error_naming_the_header(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("TIMESTAMP,Tokens\n2024-01-01 00:00:00,5\n")
    with pytest.raises(UsageError) as e:
        read(p, "azure")
    assert str(e.value).startswith(f"{p}:1: header: CSV header lacks ContextTokens, GeneratedTokens")
    with pytest.raises(UsageError, match="cannot tell the format"):
        read(p)
    rows = tmp_path / "rows.csv"
    rows.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-01-01 00:00:00,5\n2024-01-01 00:00:01,x,2\n")
    recs, problems = read(rows)
    assert recs == []
    assert problems.examples == {
        "bad_row": [{"line": 2, "field": "row", "error": "2 columns, the header has 3"}],
        "bad_value": [{"line": 3, "field": "ContextTokens", "error": "must be a whole number >= 1, got 'x'"}],
    }


def test_unknown_format_and_missing_file_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="--format: unknown format 'xml'"):
        formats.source(tmp_path, "xml").module()
    with pytest.raises(UsageError, match="No such file"):
        read(tmp_path / "none.jsonl", "llmchaos")


def test_a_long_log_is_streamed_in_bounded_memory(tmp_path):
    p = tmp_path / "big.jsonl"
    line = '{"ts": %d, "user_id": "u%d", "input_tokens": 300, "output_tokens": 20, "lang": "en"}\n'
    with open(p, "w") as f:
        f.writelines(line % (i, i % 977) for i in range(100_000))
    tracemalloc.start()
    try:
        n = sum(1 for _ in formats.source(p).read(Problems(str(p))))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == 100_000
    assert peak < p.stat().st_size / 20  # an 8 MB log read in well under 0.4 MB
