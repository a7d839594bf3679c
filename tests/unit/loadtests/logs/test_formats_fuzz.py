"""Any line, any value in any field, in every format: a record (whose fields have the types the
replay relies on) or a counted problem naming its line; never an exception. Any bytes at all (gzip
or not, lines of any length up to the limit and past it), in any format or `auto`, through the
reader and `logs stats`: a result, or one line and exit status 2; never a traceback or a hang."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from llmchaos.cli import main
from loadtests.logs import azure, burstgpt, formats, gemini_log, jsonl, mooncake, openai_log
from loadtests.logs.lines import Lines
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


def check(module, data: bytes, header: str = "", limit: int = 2**20) -> None:
    problems = Problems("fuzz")
    lines = (len(data.splitlines()) if header else data.count(b"\n")) + 1  # CSV ends a line at CR too
    n = 0
    for rec in formats.checked(module.rows(Lines(io.BytesIO(header.encode() + data), "fuzz", limit), {}), problems):
        n += 1
        assert isinstance(rec.user, str)
        assert rec.offset >= 0
        assert rec.body is not None or (isinstance(rec.input_tokens, int) and 1 <= rec.input_tokens <= 2**21)
        assert rec.output_tokens is None or 0 <= rec.output_tokens <= 2**21
        assert all(isinstance(h, int) for h in rec.hash_ids)
    assert n + problems.total <= lines
    for examples in problems.examples.values():
        assert all(1 <= e["line"] <= lines + 1 for e in examples)


@pytest.mark.fuzz
@given(name=st.sampled_from(sorted(MODULES)), data=st.data(), limit=st.sampled_from([8, 64, 2**20]))
def test_json_formats_take_any_object_or_line(name, data, limit):
    module = MODULES[name]
    rows = data.draw(st.lists(objects(module) | st.text(max_size=20), max_size=12))
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows)
    check(module, text.encode("utf-8", "surrogatepass"), limit=limit)


@pytest.mark.fuzz
@given(
    module=st.sampled_from([azure, burstgpt]),
    rows=st.lists(st.lists(st.text(max_size=12), max_size=7), max_size=12),
)
@example(module=azure, rows=[["\r0"]])  # a bare CR inside a line: the row is counted bad
def test_csv_formats_take_any_row(module, rows):
    header = ",".join(module.COLUMNS.values()) + "\n"
    data = "\n".join(",".join(json.dumps(v) if "," in v or '"' in v else v for v in row) for row in rows)
    check(module, data.encode("utf-8", "surrogatepass"), header)


LINE = st.binary(max_size=300) | st.sampled_from(
    [b'{"ts": 1e308, "user_id": "u", "input_tokens": 3}', b'{"timestamp": 0, "input_length": 1e11}', b"\x1f\x8b"]
)


@pytest.mark.fuzz
@given(
    lines=st.lists(LINE, max_size=8),
    fmt=st.sampled_from(["auto", *formats.FORMATS]),
    limit=st.integers(1, 400),
    packed=st.booleans(),
)
@example(lines=[b"\x00,\x00", b"\xff\xfe"], fmt="azure", limit=64, packed=False)
@example(lines=[b"TIMESTAMP,ContextTokens,GeneratedTokens", b"1," + b"9" * 200], fmt="auto", limit=32, packed=True)
def test_any_bytes_in_any_format_are_a_result_or_one_line_and_exit_2(lines, fmt, limit, packed):
    data = b"\n".join(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log"
        path.write_bytes(gzip.compress(data) if packed else data)
        for argv in (["stats", "--json"], ["convert", "--out", str(Path(tmp) / "out.jsonl")]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = main(["logs", *argv, str(path), "--format", fmt, "--max-line-bytes", str(limit)])
            assert status in (0, 2), err.getvalue()
            if status == 2:
                assert err.getvalue().count("\n") == 1, err.getvalue()
                assert err.getvalue().startswith("llmchaos: error: "), err.getvalue()
            elif argv[0] == "stats":
                assert json.loads(out.getvalue())["requests"] >= 0
