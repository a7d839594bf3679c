"""CSV rows: a header without the format's columns is an error naming it; a short row or a bad
value is a counted problem."""

from __future__ import annotations

import pytest

from llmchaos.errors import UsageError
from tests.unit.loadtests.logs.reading import read


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
        "bad_value": [
            {"line": 3, "field": "ContextTokens", "error": "must be a whole number from 1 to 2097152, got 'x'"}
        ],
    }
