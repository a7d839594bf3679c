"""Bad lines: counted by kind with their line numbers, or (strict) the first as
FILE:LINE: field: message."""

from __future__ import annotations

import pytest

from llmchaos.errors import UsageError
from tests.unit.loadtests.logs.reading import jsonl, read


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
