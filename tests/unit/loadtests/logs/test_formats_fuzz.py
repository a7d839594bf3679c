"""Any line, any value in any field, in every format: a record (whose fields have the types the
replay relies on) or a counted problem naming its line; never an exception."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from loadtests.logs import azure, burstgpt, formats, gemini_log, jsonl, mooncake, openai_log
from loadtests.logs.problems import Problems

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
MODULES = {m.NAME: m for m in (jsonl, mooncake, openai_log, gemini_log)}


def objects(module):
    keys = sorted({*module.COLUMNS.values(), "response", "messages", "prompt", "contents", "block_tokens"})
    return st.dictionaries(st.sampled_from(keys), JSON, max_size=8)


def check(module, data: bytes, header: str = "") -> None:
    problems = Problems("fuzz")
    lines = (len(data.splitlines()) if header else data.count(b"\n")) + 1  # CSV ends a line at CR too
    n = 0
    for rec in formats.checked(module.rows(io.BytesIO(header.encode() + data), "fuzz", {}), problems):
        n += 1
        assert isinstance(rec.user, str)
        assert rec.offset >= 0
        assert rec.body is not None or (isinstance(rec.input_tokens, int) and rec.input_tokens >= 1)
        assert rec.output_tokens is None or rec.output_tokens >= 0
        assert all(isinstance(h, int) for h in rec.hash_ids)
    assert n + problems.total <= lines
    for examples in problems.examples.values():
        assert all(1 <= e["line"] <= lines + 1 for e in examples)


@pytest.mark.fuzz
@given(name=st.sampled_from(sorted(MODULES)), data=st.data())
def test_json_formats_take_any_object_or_line(name, data):
    module = MODULES[name]
    rows = data.draw(st.lists(objects(module) | st.text(max_size=20), max_size=12))
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows)
    check(module, text.encode("utf-8", "surrogatepass"))


@pytest.mark.fuzz
@given(
    module=st.sampled_from([azure, burstgpt]),
    rows=st.lists(st.lists(st.text(max_size=12), max_size=7), max_size=12),
)
@example(module=azure, rows=[["\r0"]])  # a bare CR ends a CSV line: line numbers follow the csv module's
def test_csv_formats_take_any_row(module, rows):
    header = ",".join(module.COLUMNS.values()) + "\n"
    data = "\n".join(",".join(json.dumps(v) if "," in v or '"' in v else v for v in row) for row in rows)
    check(module, data.encode("utf-8", "surrogatepass"), header)
