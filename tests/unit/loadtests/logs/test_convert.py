"""`logs convert`: any format as our JSONL; reading the converted file gives the same requests."""

import io

import pytest

from loadtests.logs import convert, formats, jsonl
from loadtests.logs.lines import Lines
from loadtests.logs.problems import Problems
from tests.traces import AZURE, MOONCAKE, head


def our_records(data: bytes):
    problems = Problems("converted")
    recs = list(formats.checked(jsonl.rows(Lines(io.BytesIO(data), "converted"), {}), problems))
    assert problems.total == 0
    return recs


FIELDS = ("offset", "user", "session", "lang", "api", "model", "body", "input_tokens", "output_tokens", "hash_ids")


@pytest.mark.parametrize("trace", [AZURE, MOONCAKE])
def test_traces_convert_to_the_same_requests(tmp_path, trace):
    src = formats.source(head(trace, 300, tmp_path / trace.name))
    original = list(src.read(Problems("t")))
    converted = our_records(b"".join(convert.encoded(original)))
    assert [tuple(getattr(r, f) for f in FIELDS) for r in converted] == [
        tuple(getattr(r, f) for f in FIELDS) for r in original
    ]


def test_a_gateway_log_converts_with_its_body_and_response(tmp_path):
    p = tmp_path / "gw.jsonl"
    p.write_text(
        '{"timestamp": 5, "user": "u", "output_tokens": 9, "body": {"messages": [{"role": "user", "content": "x"}]}}\n'
    )
    (rec,) = formats.source(p).read(Problems("gw"))
    (back,) = our_records(b"".join(convert.encoded([rec])))
    assert (back.api, back.body, back.output_tokens, back.user) == ("openai-chat", rec.body, 9, "u")
