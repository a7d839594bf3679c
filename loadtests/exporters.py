"""Prometheus export of the merged results: served live by the master, pushed to a Pushgateway."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import gevent
from prometheus_client import CollectorRegistry, push_to_gateway
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from llmchaos.metrics import FAULT_ACTIVE, LABELS, METRICS, REQUESTS_TOTAL
from loadtests.collector import Merged

log = logging.getLogger("llmchaos.exporters")
FaultState = Callable[[], list[tuple[str, str, str, bool]]]  # (fault, kind, target, active)


class ResultsCollector:
    """Renders the merged HDR histograms as Prometheus histograms on our bucket edges."""

    def __init__(self, merged: Merged, faults: FaultState | None = None) -> None:
        self.merged, self.faults = merged, faults

    def collect(self) -> Iterator[Metric]:
        families: dict[str, HistogramMetricFamily] = {}
        for key, h in self.merged.hist:
            m = METRICS[key.metric]
            fam = families.get(m.key)
            if fam is None:
                fam = families[m.key] = HistogramMetricFamily(m.prom, m.help, labels=list(LABELS))
            gevent.sleep(0)  # ~1 ms a histogram: let the streams in flight be read in between
            counts = h.cumulative(m.buckets)
            buckets = [(_le(b), c) for b, c in zip(m.buckets, counts)] + [("+Inf", h.count)]
            fam.add_metric([key.target, key.lang, key.api, key.phase], buckets, h.sum)
        yield from families.values()
        total = CounterMetricFamily(REQUESTS_TOTAL, "Requests issued, by outcome.",
                                    labels=[*LABELS, "outcome"])
        for k, n in self.merged.outcomes.items():
            total.add_metric(list(k), n)
        yield total
        if self.faults is not None:
            g = GaugeMetricFamily(FAULT_ACTIVE, "1 while a fault window is active.",
                                  labels=["fault", "kind", "target"])
            for name, kind, target, active in self.faults():
                g.add_metric([name, kind, target], 1.0 if active else 0.0)
            yield g


def _le(bound: float) -> str:
    return repr(float(bound))


def registry(merged: Merged, faults: FaultState | None = None) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ResultsCollector(merged, faults))
    return reg


def push(gateway: str, reg: CollectorRegistry, run_id: str, job: str = "llmchaos") -> bool:
    """Replace this run's group on the Pushgateway; a failure is logged, never fatal to the run."""
    try:
        push_to_gateway(gateway, job=job, registry=reg, grouping_key={"run_id": run_id}, timeout=10)
        return True
    except OSError as e:
        log.warning("push to %s failed: %s", gateway, e)
        return False
