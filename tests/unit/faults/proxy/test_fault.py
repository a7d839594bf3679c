import math

import pytest

from faults.proxy.fault import SSEFault

BAD = [
    ({"seed": {}}, "seed must be an integer"),
    ({"seed": True}, "seed must be an integer"),
    ({"first_event_delay": math.nan}, "first_event_delay must be a finite number of seconds"),
    ({"hold": math.inf}, "hold must be a finite number of seconds"),
    ({"jitter": math.nan}, "jitter must be a finite number of seconds"),
    ({"jitter": -1}, "jitter must not be negative"),
    ({"first_event_delay": "soon"}, "first_event_delay must be a finite number of seconds"),
    ({"bandwidth": math.nan}, "bandwidth must be a finite number"),
    ({"bandwidth": -5}, "bandwidth must not be negative"),
    ({"drop_ratio": math.nan}, "drop_ratio must be within [0, 1]"),
    ({"drop_ratio": "0.5"}, "drop_ratio must be within [0, 1]"),
    ({"corrupt_ratio": 2}, "corrupt_ratio must be within [0, 1]"),
    ({"corrupt_ratio": True}, "corrupt_ratio must be within [0, 1]"),
    ({"error_ratio": 1.5}, "error_ratio must be within [0, 1]"),
    ({"error_status": 429.0}, "error_status must be one of 429, 500, 502, 503, 504"),
    ({"error_status": 404}, "error_status must be one of"),
    ({"retry_after": "1\r\nset-cookie: x=1"}, "retry_after must be a whole number of seconds"),
    ({"retry_after": 1.5}, "retry_after must be a whole number of seconds"),
    ({"retry_after": -1}, "retry_after must not be negative"),
    ({"reset": "no", "cut_after": 3}, "reset must be true or false"),
    ({"reset": True}, "reset needs cut_after"),
    ({"cut_after": 2.5}, "cut_after must be a whole number"),
    ({"cut_after": False}, "cut_after must be a whole number"),
    ({"langs": "en"}, "langs must be a list of language tags"),
    ({"langs": ["en", "xx"]}, "langs has an unknown language 'xx'"),
    ({"name": 3}, "name must be a non-empty string"),
    ({"colour": "red"}, "unknown field 'colour'"),
]


@pytest.mark.parametrize(("data", "message"), BAD, ids=[str(d) for d, _ in BAD])
def test_each_bad_field_is_named(data, message):
    with pytest.raises(ValueError, match="^" + message.split(" ")[0]) as e:
        SSEFault.from_json(data)
    assert message in str(e.value)
    assert e.value.field == next(iter(data))  # a FaultError names its field


def test_a_fault_is_a_json_object():
    with pytest.raises(ValueError, match="a fault is a JSON object"):
        SSEFault.from_json([])  # type: ignore[arg-type]  # what a client may send


def test_numbers_and_durations_are_taken_as_seconds():
    f = SSEFault.from_json(
        {"first_event_delay": "300ms", "hold": 1, "jitter": "0s", "drop_ratio": 1, "langs": ["de", "ja"], "seed": 4}
    )
    assert (f.first_event_delay, f.hold, f.jitter, f.drop_ratio, f.langs, f.seed) == (
        0.3,
        1.0,
        0.0,
        1.0,
        ["de", "ja"],
        4,
    )
    assert isinstance(f.hold, float)
    assert f.applies_to("de")
    assert not f.applies_to("d")  # a tag, not a substring
    assert not f.applies_to(None)
