"""The master's merge: every worker's reports added into the run's totals (HDR histograms add
bucket by bucket, so the merge is exact), and the workers' last data collected at test stop."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import gevent

from llmchaos.histogram import HistogramSet
from llmchaos.run import RequestsWriter
from loadtests.collector import YIELD_EVERY, Collector

if TYPE_CHECKING:  # importing locust monkey-patches the process: tests import this module without it
    from locust.runners import MasterRunner

log = logging.getLogger("llmchaos")
FLUSH_MSG, FINAL_MSG = "llmchaos_flush", "llmchaos_final"  # the master asks for, and gets, a worker's last data
FINAL_WAIT_S = 15.0


class Merged:
    """The run's totals: the master's merge of its workers, or a single process's own collector
    (shared, not copied); plus each process's self-watch samples."""

    def __init__(self, requests: RequestsWriter | None = None, local: Collector | None = None) -> None:
        self.hist = local.hist if local else HistogramSet()
        self.outcomes: Counter[tuple[str, ...]] = local.outcomes if local else Counter()
        self.slo_counts: Counter[tuple[str, ...]] = local.slo_counts if local else Counter()
        self.requests = requests
        self.generator: dict[str, dict[str, Any]] = {}  # process -> cpu and loop-lag samples, read counts

    def merge(self, data: dict[str, Any]) -> None:
        """Add a worker's report."""
        for item in data["hist"]:
            self.hist.merge(HistogramSet.decode([item]))
            gevent.sleep(0)
        for *k, n in data["outcomes"]:
            self.outcomes[tuple(k)] += n
        for *k, n in data["slo"]:
            self.slo_counts[tuple(k)] += n
        self.write_records(data["records"])

    def write_records(self, lines: list[bytes]) -> None:
        if self.requests is None:
            return
        for i in range(0, len(lines), YIELD_EVERY):
            self.requests.write(lines[i : i + YIELD_EVERY])
            gevent.sleep(0)

    def watch(self, process: str, samples: dict[str, Any]) -> None:
        """Add a process's self-watch samples (lists grow, counts add)."""
        g = self.generator.setdefault(process, {})
        for k, v in samples.items():
            g[k] = g[k] + v if k in g else v


class Finals:
    """At test stop the master asks every worker for its last data and waits for all of it, instead
    of trusting Locust's 0.5 s after quit."""

    def __init__(self) -> None:
        self.received: set[str] = set()

    def collect(self, runner: MasterRunner) -> None:
        clients = {c.id for c in runner.clients.values()}
        self.received = set()
        for cid in clients:
            runner.send_message(FLUSH_MSG, None, client_id=cid)
        deadline = time.monotonic() + FINAL_WAIT_S
        while not self.received >= clients and time.monotonic() < deadline:
            gevent.sleep(0.05)
        if missing := clients - self.received:
            log.warning("no final data from %d worker(s) in %.0fs: %s", len(missing), FINAL_WAIT_S, sorted(missing))
