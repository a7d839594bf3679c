"""Each request in Locust's own statistics: its TTFT and E2E in ms under its language (and side), a
failure with its outcome, and a request the test cancelled never counted as the target's failure."""

from __future__ import annotations

from typing import Any

from loadtests import locust_table
from loadtests.record import RequestRecord


class Recorded:
    def __init__(self) -> None:
        self.fired: list[dict[str, Any]] = []

    def fire(self, **kwargs: object) -> None:
        self.fired.append(kwargs)


def fired(rec: RequestRecord, sides: bool = False) -> list[tuple[str, str, float, Any]]:
    event = Recorded()
    locust_table.fire(event, rec, sides)
    return [(f["request_type"], f["name"], f["response_time"], f["exception"]) for f in event.fired]


def test_an_answer_is_its_ttft_and_e2e_in_ms_with_its_tokens():
    rec = RequestRecord("de", "openai-chat", "t", ttft=0.25, e2e=1.5, outcome="ok", usage_tokens=40)
    assert fired(rec) == [("TTFT", "de", 250.0, None), ("E2E", "de", 1500.0, None)]
    event = Recorded()
    locust_table.fire(event, rec, sides=False)
    assert event.fired[1]["response_length"] == 40


def test_a_failure_carries_its_outcome_and_two_sides_name_theirs():
    rec = RequestRecord("ja", "openai-chat", "t", side="B", e2e=0.5, outcome="stalled", error="no event in 30s")
    ((kind, name, ms, error),) = fired(rec, sides=True)
    assert (kind, name, ms, str(error)) == ("E2E", "B ja", 500.0, "stalled: no event in 30s")


def test_a_request_the_test_cancelled_is_no_failure():
    rec = RequestRecord("en", "openai-chat", "t", ttft=0.1, outcome="cancelled", at_stop=True)
    assert fired(rec) == [("TTFT", "en", 100.0, None)]
