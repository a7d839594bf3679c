"""Gateway request-body logs (openai-log, gemini-log): fields mapped by --columns, the API told
from the body, the user and language from it where the columns name none."""

from __future__ import annotations

from loadtests.logs import formats
from tests.unit.loadtests.logs.reading import jsonl, read


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
