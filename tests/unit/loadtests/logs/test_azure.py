"""Azure LLM inference traces: the public 2023 trace row by row (tokens, offsets from its
date-times, a user per request) and the 2024 files' zoned timestamps."""

from __future__ import annotations

import pytest

from loadtests.logs import formats
from tests.traces import AZURE, trace
from tests.unit.loadtests.logs.reading import read


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


def test_azure_2024_timestamps_with_a_zone(tmp_path):
    p = tmp_path / "AzureLLMInferenceTrace_code_1week.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:00.009930+00:00,2162,5\n"
        "2024-05-10 00:00:01.509930+00:00,3026,11\n"
    )
    recs, _ = read(p)
    assert [r.offset for r in recs] == [0.0, 1.5]
