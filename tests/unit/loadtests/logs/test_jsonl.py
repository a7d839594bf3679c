"""Our own JSONL log: lines with request bodies and recorded responses, and lines with a trace's
token counts and hash_ids."""

from __future__ import annotations

from tests.unit.loadtests.logs.reading import jsonl, read


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
