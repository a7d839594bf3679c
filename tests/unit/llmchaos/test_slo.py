import math

import pytest
from hypothesis import example, given

from llmchaos import slo
from llmchaos.errors import UsageError
from llmchaos.histogram import HistogramSet, Key
from loadtests.record import RequestRecord
from tests.yaml_documents import DOCUMENTS, load_text


def test_registry_slos_and_file_overrides(tmp_path):
    p = tmp_path / "slo.yaml"
    p.write_text("en:\n  ttft_p99_ms: 250\n  e2e_p95_ms: 4000\n")
    slos = slo.load(str(p))
    assert slos["en"] == {"ttft_p99_ms": 250.0, "itl_p99_ms": 50, "e2e_p95_ms": 4000.0}
    assert slos["ja"]["ttft_p99_ms"] == 200


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("xx:\n  ttft_p99_ms: 1\n", ":1: xx: unknown language"),
        ("en:\n  ttft_p99: 1\n", ":2: en.ttft_p99: unknown SLO"),
        ("en:\n  ttft_p99_ms: -3\n", ":2: en.ttft_p99_ms: must be a positive number of ms"),
        ("en: [1]\n", ":1: en: must be a mapping"),
        ("en: {ttft_p99_ms: 1\n", ":2: invalid YAML"),
    ],
)
def test_bad_slo_files_name_file_line_and_field(tmp_path, text, message):
    p = tmp_path / "slo.yaml"
    p.write_text(text)
    with pytest.raises(UsageError) as e:
        slo.load(str(p))
    assert str(e.value).startswith(f"{p}{message}")


def rec(**kw) -> RequestRecord:
    base = {
        "lang": "en",
        "api": "a",
        "target": "t",
        "ttft": 0.05,
        "e2e": 0.14,
        "gaps": [0.01] * 9,
        "chunks": ["x"] * 10,
        "usage_tokens": 10,
    }
    return RequestRecord(**{**base, **kw})


def test_attainment_counts_failures_as_misses():
    limits = {"ttft_p99_ms": 100, "itl_p99_ms": 50}
    assert rec().attains(limits)
    assert not rec(ttft=0.2).attains(limits)
    assert not rec(outcome="truncated").attains(limits)
    h = HistogramSet()
    for v in (0.05, 0.06, 0.3):
        h.record(Key("t", "en", "a", "baseline", "ttft"), v)
    counts = {("t", "en", "a", "baseline", "issued"): 4, ("t", "en", "a", "baseline", "met"): 2}
    (row,) = slo.evaluate({"en": {"ttft_p50_ms": 100}}, h, counts, duration_s=2.0)
    assert (row.attainment, row.goodput_rps, row.passed) == (0.5, 1.0, True)
    (row,) = slo.evaluate({"en": {"ttft_p99_ms": 100}}, h, counts, duration_s=2.0)
    assert not row.passed
    assert row.checks[0].value_ms == pytest.approx(300, rel=0.001)


def test_requests_cancelled_at_stop_are_not_issued_but_counted_apart():
    h = HistogramSet()
    h.record(Key("t", "en", "a", "baseline", "ttft"), 0.05)
    counts = {
        ("t", "en", "a", "baseline", "issued"): 3,
        ("t", "en", "a", "baseline", "met"): 3,
        ("t", "en", "a", "baseline", "at_stop"): 2,
        ("t", "en", "a", "fault", "at_stop"): 1,
    }
    (row,) = slo.evaluate({"en": {"ttft_p99_ms": 100}}, h, counts, duration_s=1.0)
    assert (row.issued, row.attained, row.cancelled_at_stop, row.attainment) == (3, 3, 3, 1.0)


@pytest.mark.fuzz
@given(text=DOCUMENTS)
@example(text="? [en]\n: {ttft_p99_ms: 1}\n")  # was a TypeError (unhashable key)
@example(text="en: {ttft_p99_ms: .nan}\n")  # was taken: a threshold nothing meets or fails
@example(text="en: {ttft_p99_ms: !!int x}\n")  # was a ValueError
@example(text="\x1f")  # was an error without a line
def test_any_yaml_is_slos_or_one_line_naming_file_and_line(text):
    got = load_text(slo.load, text)
    if isinstance(got, dict):
        assert set(got) == set(slo.load(None))
        assert all(0 < ms < math.inf for limits in got.values() for ms in limits.values())


def test_a_key_given_twice_is_named():
    got = load_text(slo.load, "en:\n  ttft_p99_ms: 100\n  ttft_p99_ms: 200\n")
    assert isinstance(got, UsageError)
    assert (got.line, got.field, got.message) == (3, "en.ttft_p99_ms", "given twice")
