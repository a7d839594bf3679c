import pytest

from tests.unit.faults.schedules import GOOD, assert_rejected, load

BAD = [
    ("{first_event_delay: .nan}", ":9: faults[0].params.first_event_delay: first_event_delay must be a finite"),
    ("{jitter: .inf}", ":9: faults[0].params.jitter: jitter must be a finite"),
    ("{cut_after: 3, reset: 'no'}", ":9: faults[0].params.reset: reset must be true or false"),
    ("{langs: en}", ":9: faults[0].params.langs: langs must be a list of language tags"),
    ("{error_status: 429.0}", ":9: faults[0].params.error_status: error_status must be one of"),
    ("{retry_after: '1\\r\\nx: y'}", ":9: faults[0].params.retry_after: retry_after must be a whole number"),
    ("{colour: red}", ":9: faults[0].params.colour: unknown field"),
]


@pytest.mark.parametrize(("params", "message"), BAD)
def test_bad_sse_params_name_file_line_and_field(tmp_path, params, message):
    assert_rejected(tmp_path, GOOD.replace("{drop_ratio: 0.15}", params), message)


def test_durations_as_design_writes_them(tmp_path):
    spec = load(tmp_path, GOOD.replace("{drop_ratio: 0.15}", "{drop_ratio: 0.15, first_event_delay: 0s, hold: 300ms}"))
    assert spec.faults[0].params["hold"] == "300ms"  # sent as written; the proxy reads it as 0.3 s
