import pytest

from llmchaos.errors import UsageError
from llmchaos.run.requests import RequestLine, RequestsWriter, read


def line(**kw) -> RequestLine:
    base = {
        "request_id": "r1",
        "lang": "en",
        "api": "openai-chat",
        "target": "t",
        "phase": "baseline",
        "open_loop": False,
        "intended": 1.0,
        "sent": 1.0,
        "schedule_lag": 0.0,
        "outcome": "ok",
    }
    return RequestLine(**{**base, **kw})


def test_lines_written_are_read_back_as_they_were(tmp_path):
    path = tmp_path / "requests.jsonl"
    lines = [line(), line(request_id="r2", ttft=0.1, e2e=0.5, gaps=[0.01, 0.02], usage_tokens=3, output_tokens=3)]
    writer = RequestsWriter(path)
    writer.write(x.encode() for x in lines)
    writer.close()
    assert writer.written == 2
    assert list(read(path)) == lines


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"request_id": 5}', ":2: request_id: Input should be a valid string"),
        ("{not json", ":2: "),
        ('{"request_id": "r"}', ":2: lang: Field required"),
    ],
)
def test_a_bad_line_names_the_file_the_line_and_the_field(tmp_path, text, says):
    path = tmp_path / "requests.jsonl"
    path.write_bytes(line().encode() + b"\n" + text.encode() + b"\n")
    with pytest.raises(UsageError) as e:
        list(read(path))
    assert str(e.value).startswith(f"{path}{says}")


def test_a_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError) as e:
        list(read(tmp_path / "nope.jsonl"))
    assert str(e.value) == f"{tmp_path / 'nope.jsonl'}: No such file or directory"


def test_itl_follows_each_events_tokens_and_an_old_line_spreads_them_evenly():
    kept = line(gaps=[0.02, 0.03], output_tokens=6, tokens_per_event=[1, 2, 3])
    assert kept.itl() == ([0.01, 0.01], [2.0, 3.0])
    one_each = line(gaps=[0.02, 0.03], output_tokens=3)
    assert one_each.itl() == ([0.02, 0.03], [1.0, 1.0])
    before_the_field = line(gaps=[0.02, 0.03], output_tokens=6)  # written before tokens_per_event existed
    assert before_the_field.itl() == ([0.01, 0.015], [2.0, 2.0])


@pytest.mark.parametrize(
    ("fields", "says"),
    [  # calibrate had fitted these without complaint (issue 34, defect 13)
        ({"ttft": -0.5, "e2e": 1.0}, ":2: ttft: below zero"),
        ({"ttft": 0.5, "e2e": 0.2}, ":2: e2e: before the first token"),
        ({"ttft": 0.1, "ttfa": 0.9, "e2e": 0.5}, ":2: e2e: before the first token"),
        ({"output_tokens": 3, "unstreamed_tokens": 4}, ":2: unstreamed_tokens: must be within 0 and output_tokens"),
    ],
)
def test_times_and_counts_that_cannot_be_are_refused_by_the_reader(tmp_path, fields, says):
    path = tmp_path / "requests.jsonl"
    path.write_bytes(line().encode() + b"\n" + line(**fields).encode() + b"\n")
    with pytest.raises(UsageError) as e:
        list(read(path))
    assert str(e.value).startswith(f"{path}{says}")
