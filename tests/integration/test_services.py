"""Round trip through a real Pushgateway and a real Prometheus (tests/services.py)."""

import uuid
from urllib.parse import urlparse

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, delete_from_gateway, push_to_gateway

from tests.services import prometheus, pushgateway

JOB = "llmchaos-services-test"
OBSERVED = [0.1, 0.2, 0.3, 0.4, 0.6, 0.9]  # buckets 0.25:2, 0.5:4, 1:6, +Inf:6 -> median 0.375


def _push(url: str, run_id: str) -> None:
    registry = CollectorRegistry()
    hist = Histogram("llmchaos_test_latency_seconds", "test latency", registry=registry, buckets=(0.25, 0.5, 1.0))
    requests = Counter("llmchaos_test_requests", "test requests", ["outcome"], registry=registry)
    for v in OBSERVED:
        hist.observe(v)
    requests.labels(outcome="ok").inc(7)
    requests.labels(outcome="error").inc(2)
    push_to_gateway(urlparse(url).netloc, job=JOB, registry=registry, grouping_key={"run_id": run_id})


def _samples(url: str, run_id: str) -> dict[str, float]:
    """Lines of the gateway's /metrics that belong to this run: 'name{labels}' -> value."""
    out = {}
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("llmchaos_test_") and f'run_id="{run_id}"' in line:
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def _find(samples: dict[str, float], name: str, *labels: str) -> float:
    (value,) = [v for k, v in samples.items() if k.startswith(name + "{") and all(label in k for label in labels)]
    return value


def test_push_read_back_and_delete_on_a_real_pushgateway():
    run_id = uuid.uuid4().hex[:12]
    with pushgateway() as url:
        _push(url, run_id)

        samples = _samples(url, run_id)
        assert _find(samples, "llmchaos_test_requests_total", 'outcome="ok"', f'job="{JOB}"') == 7
        assert _find(samples, "llmchaos_test_requests_total", 'outcome="error"') == 2
        assert _find(samples, "llmchaos_test_latency_seconds_bucket", 'le="0.25"') == 2
        assert _find(samples, "llmchaos_test_latency_seconds_bucket", 'le="0.5"') == 4
        assert _find(samples, "llmchaos_test_latency_seconds_bucket", 'le="+Inf"') == 6
        assert _find(samples, "llmchaos_test_latency_seconds_count") == 6
        assert _find(samples, "llmchaos_test_latency_seconds_sum") == pytest.approx(sum(OBSERVED))

        api = httpx.get(url + "/api/v1/metrics").json()
        assert api["status"] == "success"
        (group,) = [g for g in api["data"] if g["labels"].get("run_id") == run_id]
        assert group["labels"]["job"] == JOB
        hist = group["llmchaos_test_latency_seconds"]
        assert hist["type"] == "HISTOGRAM"
        (metric,) = hist["metrics"]
        assert metric["count"] == "6"
        assert metric["buckets"] == {"0.25": "2", "0.5": "4", "1": "6", "+Inf": "6"}
        counter = {m["labels"]["outcome"]: float(m["value"]) for m in group["llmchaos_test_requests_total"]["metrics"]}
        assert counter == {"ok": 7.0, "error": 2.0}

        delete_from_gateway(urlparse(url).netloc, job=JOB, grouping_key={"run_id": run_id})
        assert _samples(url, run_id) == {}
        api = httpx.get(url + "/api/v1/metrics").json()
        assert not [g for g in api["data"] if g["labels"].get("run_id") == run_id]


def test_prometheus_scrapes_the_pushgateway():
    run_id = uuid.uuid4().hex[:12]
    with pushgateway() as url:
        _push(url, run_id)
        with prometheus([urlparse(url).netloc]) as prom:
            sel = f'{{job="{JOB}", run_id="{run_id}"}}'
            result = prom.wait_for(f"llmchaos_test_requests_total{sel}", lambda r: len(r) == 2)
            # honor_labels keeps the pushed job label instead of the scrape job "llmchaos".
            assert {(s["metric"]["outcome"], s["metric"]["job"], float(s["value"][1])) for s in result} == {
                ("ok", JOB, 7.0),
                ("error", JOB, 2.0),
            }

            (median,) = prom.query(f"histogram_quantile(0.5, sum by (le) (llmchaos_test_latency_seconds_bucket{sel}))")
            assert float(median["value"][1]) == pytest.approx(0.375)
            (p90,) = prom.query(f"histogram_quantile(0.9, sum by (le) (llmchaos_test_latency_seconds_bucket{sel}))")
            assert float(p90["value"][1]) == pytest.approx(0.85)  # rank 5.4 in (0.5, 1]

            up = prom.wait_for('up{job="llmchaos"}', lambda r: len(r) == 1)
            assert float(up[0]["value"][1]) == 1.0
