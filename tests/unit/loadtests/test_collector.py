import gevent

from loadtests.collector import Collector
from loadtests.record import RequestRecord


def failed(lang: str) -> RequestRecord:
    """A request with no latency samples: its only trace is its outcome count and its record."""
    return RequestRecord(lang, "openai-chat", "t", outcome="http_500", error="boom")


def test_a_request_that_ends_during_a_report_goes_whole_into_the_next():
    c = Collector({}, seed=0)
    c.add(failed("en"))
    late = gevent.spawn(c.add, failed("de"))  # runs while the report yields (counting tokens off the loop)
    first = c.report(streaming=True)
    late.join()
    second = c.report(streaming=False)
    for report in (first, second):
        issued = sum(n for *k, n in report["slo"] if k[-1] == "issued")
        assert len(report["records"]) == sum(n for *_, n in report["outcomes"]) == issued
    assert sum(n for *_, n in first["outcomes"]) + sum(n for *_, n in second["outcomes"]) == 2
