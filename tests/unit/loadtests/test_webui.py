"""The web UI tab's rows, from merged totals built of real request records."""

from llmchaos import slo
from loadtests.collector import Collector
from loadtests.merge import Merged
from loadtests.record import RequestRecord
from loadtests.webui import language_rows


def record(lang: str, ttft: float, outcome: str = "ok") -> RequestRecord:
    if outcome != "ok":
        return RequestRecord(lang, "openai-chat", "t", outcome=outcome, error="boom")
    rec = RequestRecord(lang, "openai-chat", "t", ttft=ttft, e2e=ttft + 0.02, gaps=[0.02], chunks=[" a", " b"])
    rec.count_tokens()
    return rec


def test_a_row_per_language_with_its_percentiles_outcomes_and_slo_state():
    c = Collector(slo.load(None), seed=0)
    for ttft in (0.01, 0.02, 0.03, 0.5):
        c.add(record("en", ttft))
    c.add(record("en", 0, "http_503"))
    c.add(record("ja", 0.05))
    merged = Merged(local=c)
    rows = {r["lang"]: r for r in language_rows(merged, slo.load(None), 10.0, "baseline")}
    assert set(rows) == {"en", "ja"}
    en = rows["en"]
    h = merged.hist.combined("ttft", lang="en")
    assert h is not None
    assert (en["ttft_p50_ms"], en["ttft_p99_ms"]) == (round(h.quantile(50) * 1000, 1), round(h.quantile(99) * 1000, 1))
    assert abs(en["ttft_p99_ms"] - 500.0) <= 0.5  # within the histogram's 0.1 %
    assert (en["issued"], en["outcomes"], en["attainment_pct"]) == (5, "ok 4, http_503 1", 60.0)
    assert en["slo"].startswith("FAIL ttft_p99_ms 500.")
    assert "> 100 ms" in en["slo"]
    assert rows["ja"]["slo"] == "pass"
    assert rows["ja"]["phase"] == "baseline"
