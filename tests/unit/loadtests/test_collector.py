import gevent
import pytest

from llmchaos import bounds
from llmchaos.histogram import Key
from loadtests.collector import Collector
from loadtests.record import RequestRecord


def failed(lang: str) -> RequestRecord:
    """A request with no latency samples: its only trace is its outcome count and its record."""
    return RequestRecord(lang, "openai-chat", "t", outcome="http_500", error="boom")


def test_a_request_that_ends_during_a_report_goes_whole_into_the_next():
    c = Collector({}, seed=0)
    c.add(failed("en"))
    late = gevent.spawn(c.add, failed("de"))  # runs while the drain yields (counting tokens off the loop)
    first = c.drain(streaming=True)
    late.join()
    second = c.drain(streaming=False)
    for report in (first, second):
        issued = sum(n for *k, n in report["slo"] if k[-1] == "issued")
        assert len(report["records"]) == sum(n for *_, n in report["outcomes"]) == issued
    assert sum(n for *_, n in first["outcomes"]) + sum(n for *_, n in second["outcomes"]) == 2


def test_a_request_cancelled_at_stop_is_counted_apart_from_the_issued():
    c = Collector({}, seed=0)
    c.add(RequestRecord("en", "openai-chat", "t", outcome="cancelled", at_stop=True))
    c.add(RequestRecord("en", "openai-chat", "t", outcome="cancelled"))  # by a fault or a guard: issued, missed
    assert dict(c.slo_counts) == {
        ("t", "en", "openai-chat", "baseline", "at_stop"): 1,
        ("t", "en", "openai-chat", "baseline", "issued"): 1,
    }
    assert c.outcomes[("t", "en", "openai-chat", "baseline", "cancelled")] == 2
    assert [r.line().at_stop for r in c.records] == [True, False]


def test_an_event_of_a_million_tokens_is_one_value_recorded_that_many_times():
    """The ITL samples of one event are one value that many times, recorded as such (a 20 MB event's
    millions of samples, one by one, held the event loop for seconds): the work is per event, never
    per token, whatever the machine's speed."""
    r = RequestRecord("en", "openai-chat", "t", ttft=0.1, e2e=1.0, gaps=[0.5], chunks=[" a", " b c d"])
    r.usage_tokens = 2_000_000
    values, times = r.itl_spread()
    assert (values, times) == ([pytest.approx(0.5 / 1_999_999)], [1_999_999])
    c = Collector({}, seed=0)
    c.add(r)
    itl = c.hist.get(Key("t", "en", "openai-chat", "baseline", "itl"))
    assert itl is not None
    assert itl.count == 2_000_000 - 1
    assert itl.sum == pytest.approx(0.5)


def test_each_request_is_tallied_against_its_languages_slos_in_its_starts_second():
    """recovery.py's input: per SLO key and second, the samples and those over the threshold; a
    failure is one sample over every threshold, a cancelled request none."""
    c = Collector({"en": {"ttft_p99_ms": 100, "itl_p99_ms": 50}}, seed=0)
    fast = RequestRecord("en", "openai-chat", "t", intended=1000.2, ttft=0.05, e2e=0.2, gaps=[0.02, 0.08])
    fast.chunks, fast.usage_tokens = [" a", " b", " c"], 3
    c.add(fast)
    c.add(RequestRecord("en", "openai-chat", "t", intended=1000.9, ttft=0.3, e2e=0.5, outcome="http_500"))
    c.add(RequestRecord("en", "openai-chat", "t", intended=1001.5, outcome="cancelled"))
    base = ("t", "en", "openai-chat")
    expected = {
        (*base, "ttft_p99_ms", 1000, "n"): 2,  # the fast one's TTFT and the failure
        (*base, "ttft_p99_ms", 1000, "over"): 1,
        (*base, "itl_p99_ms", 1000, "n"): 3,  # two gaps, and the failure
        (*base, "itl_p99_ms", 1000, "over"): 2,  # 80 ms, and the failure
    }
    assert dict(c.slices) == expected
    shipped = c.drain(streaming=False)["slices"]
    assert sorted(map(tuple, shipped)) == sorted((*k, n) for k, n in expected.items())
    assert not c.slices


def test_samples_a_read_of_several_events_left_uncertain_are_counted_apart_and_shipped():
    """bounds.py's input: each uncertain sample as measured, at its least and at its most, by counter,
    apart from the SLO counts (a scrape walks those), drained with the rest."""
    r = RequestRecord("en", "openai-chat", "t", ttft=0.1, e2e=0.3, gaps=[0.1, 0.1], chunks=[" a", " b", " c"])
    r.late_spans = [(0, 1, 0.004)]  # a read the second event's bytes after the first
    c = Collector({}, seed=0)
    c.add(r)
    base = ("t", "en", "openai-chat", "baseline")
    want = [*bounds.late_keys("ttft", 0.1, 0.004, 0.0), *bounds.late_keys("itl", 0.1, 0.0, 0.004)]
    assert dict(c.late) == {(*base, k): 1 for k in want}
    assert not any(k[4].startswith("late") for k in c.slo_counts)
    report = c.drain(streaming=False)
    assert sorted(tuple(x) for x in report["late"]) == sorted((*base, k, 1) for k in want)
    assert not c.late
