import math

import pytest
from hypothesis import example, given

from llmchaos import slo
from llmchaos.errors import UsageError
from llmchaos.histogram import HistogramSet, Key
from llmchaos.run.schema import Run, Validity
from llmchaos.run.table import table
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


def fast_en() -> HistogramSet:
    h = HistogramSet()
    h.record(Key("t", "en", "a", "baseline", "ttft"), 0.05)
    return h


def counted(*rows: tuple[str, str, str, int]) -> dict[tuple[str, ...], int]:
    """(lang, phase, issued|met|at_stop, n) rows as `evaluate` takes them."""
    return {("t", lang, "a", phase, kind): n for lang, phase, kind, n in rows}


def test_requests_cancelled_at_stop_are_not_issued_but_counted_apart():
    counts = counted(("en", "baseline", "issued", 3), ("en", "baseline", "met", 3), ("en", "baseline", "at_stop", 2))
    counts |= counted(("en", "fault", "at_stop", 1))
    (row,) = slo.evaluate({"en": {"ttft_p99_ms": 100}}, fast_en(), counts, duration_s=1.0)
    assert (row.issued, row.attained, row.cancelled_at_stop, row.attainment) == (3, 3, 3, 1.0)


def test_a_language_with_nothing_issued_has_no_verdict_and_its_own_exit_status():
    # issue 18, defect 10: de's only request was cancelled at stop, and --check-slo said "ok% 0.0 FAIL"
    h = fast_en()
    counts = counted(("en", "baseline", "issued", 3), ("en", "baseline", "met", 3), ("de", "baseline", "at_stop", 1))
    de, en = slo.evaluate({"en": {"ttft_p99_ms": 100}, "de": {"ttft_p99_ms": 100}}, h, counts, duration_s=1.0)
    assert (de.lang, de.issued, de.passed, de.verdict, de.attainment) == ("de", 0, None, "no data", None)
    assert (en.passed, en.verdict) == (True, "pass")
    assert slo.exit_status([en, de]) == slo.NO_DATA == 4
    assert slo.exit_status([en]) == 0
    failed = en.model_copy(update={"passed": False})
    assert slo.exit_status([failed, de]) == 1  # a failure says more than no data
    run = Run(
        run_id="r", start="2026-01-01T00:00:00+00:00", end="2026-01-01T00:00:01+00:00", duration_s=1.0,
        command=[], config={}, targets=["t"], api="a", load_profile={}, seeds={}, host={}, generator={},
        validity=Validity(valid=True), slo=[de, en],
    )  # fmt: skip
    line = next(x for x in table(run, h).splitlines() if x.startswith("de "))
    assert line.split()[3] == "-"  # no ok% of nothing
    assert line.endswith("no data")
    assert Run.model_validate(run.to_json()).slo[0].passed is None  # "pass": null, read back


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
