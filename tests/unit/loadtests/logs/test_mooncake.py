"""Mooncake traces: the public synthetic trace's timestamps (ms), lengths and hash_ids of 512-token
blocks, a prefix family as one user."""

from __future__ import annotations

import json

import pytest

from loadtests.logs import formats
from tests.traces import MOONCAKE, trace
from tests.unit.loadtests.logs.reading import read


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
