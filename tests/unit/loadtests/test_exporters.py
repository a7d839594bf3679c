"""The client's Prometheus export: every series carries the run id; SLO counts and the generator's
own health are exported beside the histograms, in Prometheus' own text format."""

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from llmchaos import slo
from llmchaos.run import Cost, Recovery
from loadtests.collector import Collector
from loadtests.exporters import ResultsCollector
from loadtests.merge import Merged
from loadtests.record import RequestRecord


def scrape(merged: Merged, faults=None) -> dict[str, list]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ResultsCollector(merged, faults, "run-7"))
    text = generate_latest(reg).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def merged_run() -> Merged:
    c = Collector(slo.load(None), seed=0)
    fast = RequestRecord("en", "openai-chat", "t", ttft=0.01, e2e=0.04, gaps=[0.02], chunks=[" a", " b"])
    slow = RequestRecord("en", "openai-chat", "t", ttft=9.0, e2e=9.5, gaps=[0.02], chunks=[" a", " b"])
    for rec in (fast, slow, RequestRecord("en", "openai-chat", "t", outcome="http_500", error="boom")):
        rec.count_tokens()
        c.add(rec)
    m = Merged(local=c)
    m.watch("local", {"cpu": [0.25, 0.5], "lags": [0.0005, 0.003, 0.03]})
    return m


def test_every_series_carries_the_run_id():
    families = scrape(merged_run(), lambda: [("drop", "sse", "proxy", True)])
    assert {"llmchaos_ttft_seconds", "llmchaos_requests", "llmchaos_fault_active"} <= set(families)
    for name, samples in families.items():
        assert samples, name
        assert all(s.labels["run_id"] == "run-7" for s in samples), name


def test_slo_counts_count_failures_as_issued_misses():
    families = scrape(merged_run())
    issued = {s.name: s.value for s in families["llmchaos_slo_issued"] if s.name.endswith("_total")}
    met = {s.name: s.value for s in families["llmchaos_slo_met"] if s.name.endswith("_total")}
    assert issued == {"llmchaos_slo_issued_total": 3.0}
    assert met == {"llmchaos_slo_met_total": 1.0}  # the slow one missed its TTFT SLO, the 500 failed


def test_generator_health_is_the_last_cpu_sample_and_every_loop_lag_tick():
    families = scrape(merged_run())
    (cpu,) = families["llmchaos_generator_cpu_ratio"]
    assert (cpu.labels["process"], cpu.value) == ("local", 0.5)
    lag = {s.labels.get("le"): s.value for s in families["llmchaos_generator_loop_lag_seconds"]}
    assert lag["0.001"] == 1.0
    assert lag["0.005"] == 2.0
    assert lag["+Inf"] == 3.0
    assert lag[None] == 0.0335  # the sum


def test_each_fault_windows_recovery_is_exported_once_the_run_has_ended():
    def row(lang: str, recover_s: float | None, judged: int = 4) -> Recovery:
        return Recovery(
            window="slow", target="t", lang=lang, api="openai-chat", metric="ttft_p99_ms", window_s=1.0, windows=3,
            detect_s=2.0 if recover_s is not None else None, recover_s=recover_s, recovered=recover_s is not None,
            judged=judged, needed=100,
        )  # fmt: skip

    collector = ResultsCollector(merged_run(), None, "run-7")
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    live = {f.name for f in text_string_to_metric_families(generate_latest(reg).decode())}
    assert not live & {"llmchaos_fault_recover_seconds", "llmchaos_fault_recovered"}  # none while it runs
    collector.recovery = [row("en", 3.5), row("de", None), row("ja", None, judged=0)]
    families = {f.name: f.samples for f in text_string_to_metric_families(generate_latest(reg).decode())}
    assert [(s.labels["lang"], s.value) for s in families["llmchaos_fault_recover_seconds"]] == [("en", 3.5)]
    assert [(s.labels["lang"], s.value) for s in families["llmchaos_fault_recovered"]] == [("en", 1.0), ("de", 0.0)]
    assert [(s.labels["fault"], s.labels["slo"]) for s in families["llmchaos_fault_detect_seconds"]] == [
        ("slow", "ttft_p99_ms")
    ]


def test_what_a_token_cost_is_exported_once_the_run_has_ended_and_an_absent_figure_is_absent():
    def row(lang: str, j: float | None, usd: float | None, source: str = "modelled") -> Cost:
        return Cost(
            target="t", lang=lang, api="openai-chat", phase="baseline", source=source, tokens=100, requests=5,
            j_per_token=j, usd_per_mtok=usd, why=None if j is not None else "no series",
        )  # fmt: skip

    collector = ResultsCollector(merged_run(), None, "run-7")
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    assert "llmchaos_energy_per_token_joules" not in generate_latest(reg).decode()  # none while it runs
    collector.cost = [row("en", 0.31, 1.25), row("de", 0.4, None), row("ja", None, None, "absent")]
    families = {f.name: f.samples for f in text_string_to_metric_families(generate_latest(reg).decode())}
    joules = [(s.labels["lang"], s.labels["source"], s.value) for s in families["llmchaos_energy_per_token_joules"]]
    assert joules == [("en", "modelled", 0.31), ("de", "modelled", 0.4)]
    assert [(s.labels["lang"], s.value) for s in families["llmchaos_cost_per_mtok_usd"]] == [("en", 1.25)]
    assert {s.labels["run_id"] for s in families["llmchaos_cost_per_mtok_usd"]} == {"run-7"}


def test_a_conversations_turns_are_exported_by_turn_bucket_beside_the_whole():
    c = Collector(slo.load(None), seed=0)
    for turn, ttft in ((1, 0.5), (2, 0.1), (3, 0.2), (9, 0.05)):
        rec = RequestRecord("en", "openai-chat", "t", ttft=ttft, e2e=1.0, gaps=[0.02], chunks=[" a", " b"])
        rec.session, rec.turn = "en-0-0", turn
        rec.count_tokens()
        c.add(rec)
    families = scrape(Merged(local=c))
    counts = {s.labels["turn"]: s.value for s in families["llmchaos_turn_ttft_seconds"] if s.name.endswith("_count")}
    assert counts == {"1": 1, "2-3": 2, "8+": 1}
    sums = {s.labels["turn"]: s.value for s in families["llmchaos_turn_ttft_seconds"] if s.name.endswith("_sum")}
    assert sums["2-3"] == pytest.approx(0.3)
    whole = [s.value for s in families["llmchaos_ttft_seconds"] if s.name.endswith("_count")]
    assert whole == [4]
    itl = {s.labels["turn"]: s.value for s in families["llmchaos_turn_itl_seconds"] if s.name.endswith("_count")}
    assert itl == {"1": 1, "2-3": 2, "8+": 1}
