"""Each request in Locust's own statistics (its table, web UI and CSVs): TTFT and E2E per language (and
side, with two), so a Locust user sees the run where they always look. The exact figures are the
harness's histograms; Locust keeps its own rounded ones."""

from __future__ import annotations

from typing import Protocol

from loadtests.record import RequestRecord


class RequestEvent(Protocol):
    """Locust's `events.request`."""

    def fire(self, **kwargs: object) -> None: ...


def fire(request: RequestEvent, rec: RequestRecord, sides: bool) -> None:
    """`rec` as Locust's request events: its TTFT, and its E2E unless the test cancelled it (then it
    is not the target's failure); named by its language, and its side when there are two."""
    name = f"{rec.side} {rec.lang}" if sides else rec.lang
    if rec.ttft is not None:
        ttft = rec.ttft * 1000.0
        request.fire(request_type="TTFT", name=name, response_time=ttft, response_length=0, exception=None, context={})
    if rec.outcome == "cancelled":
        return
    failed = None if rec.outcome == "ok" else Exception(f"{rec.outcome}: {rec.error or ''}"[:200])
    request.fire(
        request_type="E2E",
        name=name,
        response_time=(rec.e2e or 0.0) * 1000.0,
        response_length=rec.output_tokens if rec.outcome == "ok" else 0,
        exception=failed,
        context={},
    )
