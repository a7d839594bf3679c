"""Prometheus export of the merged results: served live by the master, pushed to a Pushgateway."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import gevent
import numpy as np
from prometheus_client import CollectorRegistry, push_to_gateway, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from llmchaos.metrics import (
    FAULT_ACTIVE,
    FAULT_DETECT,
    FAULT_RECOVER,
    FAULT_RECOVERED,
    GENERATOR_CPU,
    GENERATOR_LOOP_LAG,
    JOULES_PER_TOKEN,
    LABELS,
    METRICS,
    REQUESTS_TOTAL,
    RUN_ID,
    SLO_ISSUED_TOTAL,
    SLO_MET_TOTAL,
    USD_PER_MTOK,
)
from llmchaos.run import Cost, Recovery
from loadtests.merge import Merged

log = logging.getLogger("llmchaos.exporters")
FaultState = Callable[[], list[tuple[str, str, str, bool]]]  # (fault, kind, target, active)

LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class ResultsCollector:
    """Renders the merged HDR histograms as Prometheus histograms on our bucket edges, with the
    outcome and SLO counts, the generator's own health and the fault windows; every series carries
    the run's id."""

    def __init__(self, merged: Merged | None = None, faults: FaultState | None = None, run_id: str = "") -> None:
        self.merged, self.faults, self.run_id = merged, faults, run_id
        self.recovery: list[Recovery] = []  # at the run's end
        self.cost: list[Cost] = []  # at the run's end (--energy-from)

    def collect(self) -> Iterator[Metric]:
        if self.merged is None:  # between tests
            return
        labels, run = [*LABELS, RUN_ID], [self.run_id]
        families: dict[str, HistogramMetricFamily] = {}
        for key, h in self.merged.hist:
            m = METRICS[key.metric]
            fam = families.get(m.prom)
            if fam is None:
                names = [name for name, _ in m.labels]
                fam = families[m.prom] = HistogramMetricFamily(m.prom, m.help, labels=[*LABELS, *names, RUN_ID])
            gevent.sleep(0)  # ~1 ms a histogram: let the streams in flight be read in between
            counts = h.cumulative(m.buckets)
            buckets = [(_le(b), c) for b, c in zip(m.buckets, counts, strict=True)] + [("+Inf", h.count)]
            own = [value for _, value in m.labels]
            fam.add_metric([key.target, key.lang, key.api, key.phase, *own, *run], buckets, h.sum)
        yield from families.values()
        total = CounterMetricFamily(REQUESTS_TOTAL, "Requests issued, by outcome.", labels=[*labels, "outcome"])
        for (*k, outcome), n in self.merged.outcomes.items():
            total.add_metric([*k, *run, outcome], n)
        yield total
        yield from self._slo(labels, run)
        yield from self._generator(run)
        if self.faults is not None:
            g = GaugeMetricFamily(
                FAULT_ACTIVE, "1 while a fault window is active.", labels=["fault", "kind", "target", RUN_ID]
            )
            for name, kind, target, active in self.faults():
                g.add_metric([name, kind, target, *run], 1.0 if active else 0.0)
            yield g
        yield from self._recovery(run)
        yield from self._cost(labels, run)

    def _cost(self, labels: list[str], run: list[str]) -> Iterator[Metric]:
        """What a token cost per (target, lang, api, phase), once the run has ended; absent figures absent."""
        if not self.cost:
            return
        joules = GaugeMetricFamily(JOULES_PER_TOKEN, "GPU energy per output token.", labels=[*labels, "source"])
        usd = GaugeMetricFamily(USD_PER_MTOK, "Cost per million output tokens (USD).", labels=[*labels, "source"])
        for c in self.cost:
            key = [c.target, c.lang, c.api, c.phase, *run, c.source]
            if c.j_per_token is not None:
                joules.add_metric(key, c.j_per_token)
            if c.usd_per_mtok is not None:
                usd.add_metric(key, c.usd_per_mtok)
        yield from (joules, usd)

    def _recovery(self, run: list[str]) -> Iterator[Metric]:
        """Each fault window's detection and recovery per language and SLO, once the run has ended."""
        labels = ["fault", "target", "lang", "api", "slo", RUN_ID]
        detect = GaugeMetricFamily(FAULT_DETECT, "Fault start to its first window over the SLO.", labels=labels)
        recover = GaugeMetricFamily(FAULT_RECOVER, "Fault revert to back within the SLO.", labels=labels)
        back = GaugeMetricFamily(FAULT_RECOVERED, "1: back within the SLO within the run; 0: never.", labels=labels)
        for r in (r for r in self.recovery if r.judged):
            key = [r.window, r.target, r.lang, r.api, r.metric, *run]
            if r.detect_s is not None:
                detect.add_metric(key, r.detect_s)
            if r.recover_s is not None:
                recover.add_metric(key, r.recover_s)
            back.add_metric(key, 1.0 if r.recovered else 0.0)
        if self.recovery:
            yield from (detect, recover, back)

    def _slo(self, labels: list[str], run: list[str]) -> Iterator[Metric]:
        """Issued and SLO-meeting requests (attainment is their ratio, goodput the rate of the met)."""
        assert self.merged is not None
        issued = CounterMetricFamily(SLO_ISSUED_TOTAL, "Requests issued (cut short at stop: not).", labels=labels)
        met = CounterMetricFamily(SLO_MET_TOTAL, "Requests that met their language's SLO.", labels=labels)
        counts = self.merged.slo_counts
        for (*k, state), n in counts.items():
            if state == "issued":
                issued.add_metric([*k, *run], n)
                met.add_metric([*k, *run], counts[(*k, "met")])
        yield issued
        yield met

    def _generator(self, run: list[str]) -> Iterator[Metric]:
        """Each generator process's last CPU sample and its event loop's lag, every tick so far."""
        assert self.merged is not None
        cpu = GaugeMetricFamily(GENERATOR_CPU, "Generator CPU, of one core (last sample).", labels=["process", RUN_ID])
        lag = HistogramMetricFamily(
            GENERATOR_LOOP_LAG, "How late the generator's event loop ran.", labels=["process", RUN_ID]
        )
        for process, samples in self.merged.generator.items():
            if samples["cpu"]:
                cpu.add_metric([process, *run], samples["cpu"][-1])
            lags = np.sort(np.asarray(samples["lags"], dtype=float))
            counts = np.searchsorted(lags, LOOP_LAG_BUCKETS, side="right")
            buckets = [(_le(b), int(c)) for b, c in zip(LOOP_LAG_BUCKETS, counts, strict=True)]
            lag.add_metric([process, *run], [*buckets, ("+Inf", len(lags))], float(lags.sum()))
        yield cpu
        yield lag


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
        self.results.merged, self.results.faults, self.results.run_id = merged, faults, run_id
        self.results.recovery, self.results.cost = [], []
        if self.gateway:
            self._pusher = gevent.spawn(self._push_loop, run_id)

    def _push_loop(self, run_id: str) -> None:
        while True:
            gevent.sleep(self.interval)
            push(self.gateway, self.registry, run_id)

    def finish(self, run_id: str, recovery: list[Recovery], cost: list[Cost] | None = None) -> None:
        """Stop pushing on a timer and push the final totals, with each fault window's recovery and
        what a token cost, once (the live endpoint keeps them)."""
        self.results.recovery, self.results.cost = recovery, cost or []
        if self._pusher is not None:
            self._pusher.kill(block=False)
            self._pusher = None
        if self.gateway:
            push(self.gateway, self.registry, run_id)
