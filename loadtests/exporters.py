"""Prometheus export of the merged results: served live by the master, pushed to a Pushgateway."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import gevent
from prometheus_client import CollectorRegistry, push_to_gateway, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from llmchaos.metrics import FAULT_ACTIVE, LABELS, METRICS, REQUESTS_TOTAL
from loadtests.merge import Merged

log = logging.getLogger("llmchaos.exporters")
FaultState = Callable[[], list[tuple[str, str, str, bool]]]  # (fault, kind, target, active)


class ResultsCollector:
    """Renders the merged HDR histograms as Prometheus histograms on our bucket edges."""

    def __init__(self, merged: Merged | None = None, faults: FaultState | None = None) -> None:
        self.merged, self.faults = merged, faults

    def collect(self) -> Iterator[Metric]:
        if self.merged is None:  # between tests
            return
        families: dict[str, HistogramMetricFamily] = {}
        for key, h in self.merged.hist:
            m = METRICS[key.metric]
            fam = families.get(m.key)
            if fam is None:
                fam = families[m.key] = HistogramMetricFamily(m.prom, m.help, labels=list(LABELS))
            gevent.sleep(0)  # ~1 ms a histogram: let the streams in flight be read in between
            counts = h.cumulative(m.buckets)
            buckets = [(_le(b), c) for b, c in zip(m.buckets, counts, strict=True)] + [("+Inf", h.count)]
            fam.add_metric([key.target, key.lang, key.api, key.phase], buckets, h.sum)
        yield from families.values()
        total = CounterMetricFamily(REQUESTS_TOTAL, "Requests issued, by outcome.", labels=[*LABELS, "outcome"])
        for k, n in self.merged.outcomes.items():
            total.add_metric(list(k), n)
        yield total
        if self.faults is not None:
            g = GaugeMetricFamily(FAULT_ACTIVE, "1 while a fault window is active.", labels=["fault", "kind", "target"])
            for name, kind, target, active in self.faults():
                g.add_metric([name, kind, target], 1.0 if active else 0.0)
            yield g


def _le(bound: float) -> str:
    return repr(float(bound))


def push(gateway: str, reg: CollectorRegistry, run_id: str, job: str = "llmchaos") -> bool:
    """Replace this run's group on the Pushgateway; a failure is logged, never fatal to the run."""
    try:
        push_to_gateway(gateway, job=job, registry=reg, grouping_key={"run_id": run_id}, timeout=10)
        return True
    except OSError as e:
        log.warning("push to %s failed: %s", gateway, e)
        return False


class Exporter:
    """The master's export of the run's totals: served on `--prometheus-port` (one server for the
    process's life, showing the current test) and pushed every `--push-interval` and at the end."""

    def __init__(self, port: int, gateway: str, interval: float) -> None:
        self.gateway, self.interval = gateway, interval
        self.results = ResultsCollector()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.results)
        self._pusher: gevent.Greenlet | None = None
        if port:
            start_http_server(port, addr="0.0.0.0", registry=self.registry)

    def start(self, merged: Merged, faults: FaultState | None, run_id: str) -> None:
        self.results.merged, self.results.faults = merged, faults
        if self.gateway:
            self._pusher = gevent.spawn(self._push_loop, run_id)

    def _push_loop(self, run_id: str) -> None:
        while True:
            gevent.sleep(self.interval)
            push(self.gateway, self.registry, run_id)

    def finish(self, run_id: str) -> None:
        """Stop pushing on a timer and push the final totals once (the live endpoint keeps them)."""
        if self._pusher is not None:
            self._pusher.kill(block=False)
            self._pusher = None
        if self.gateway:
            push(self.gateway, self.registry, run_id)
