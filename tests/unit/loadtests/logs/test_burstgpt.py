"""BurstGPT traces: the CSV as published (model, request and response tokens, offsets)."""

from __future__ import annotations

from tests.unit.loadtests.logs.reading import read


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
