"""Formats by name (an unknown one and a missing file are usage errors); a log streamed in bounded memory."""

from __future__ import annotations

import tracemalloc

import pytest

from llmchaos.errors import UsageError
from loadtests.logs import flags, formats
from loadtests.logs.problems import Problems
from tests.unit.loadtests.logs.reading import read


def test_the_parsers_names_are_the_readers():
    assert ("auto", *formats.FORMATS) == flags.NAMES


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
