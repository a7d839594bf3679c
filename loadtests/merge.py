"""The run's totals on the master: every worker's shipments added in (HDR histograms add bucket by
bucket, so the merge is exact), or a single process's own collector (shared, not copied); the
requests written to each side's requests.jsonl as they arrive."""

from __future__ import annotations

from collections import Counter
from typing import Any

import gevent

from llmchaos.histogram import HistogramSet
from llmchaos.run import RequestsWriter
from loadtests.collector import YIELD_EVERY, Collector
from loadtests.endings import Endings


class Merged:
    """The run's totals, plus each process's self-watch samples."""

    def __init__(self, requests: dict[str, RequestsWriter] | None = None, local: Collector | None = None) -> None:
        self.hist = local.hist if local else HistogramSet()
        self.outcomes: Counter[tuple[str, ...]] = local.outcomes if local else Counter()
        self.slo_counts: Counter[tuple[str, ...]] = local.slo_counts if local else Counter()
        self.slices: Counter[tuple[Any, ...]] = local.slices if local else Counter()  # recovery.py's tallies
        self.late: Counter[tuple[str, ...]] = local.late if local else Counter()  # bounds.py's uncertain samples
        self.tokens: Counter[tuple[Any, ...]] = local.tokens if local else Counter()  # energy/ shares joules by it
        self.produced: Counter[tuple[str, ...]] = local.produced if local else Counter()
        self.endings = local.endings if local else Endings()
        self.requests = requests or {}  # side -> its requests.jsonl
        self.generator: dict[str, dict[str, Any]] = {}  # process -> cpu and loop-lag samples, read counts

    def merge(self, data: dict[str, Any]) -> None:
        """Add a worker's collector data."""
        for item in data["hist"]:
            self.hist.merge(HistogramSet.decode([item]))
            gevent.sleep(0)
        for *k, n in data["outcomes"]:
            self.outcomes[tuple(k)] += n
        for *k, n in data["slo"]:
            self.slo_counts[tuple(k)] += n
        for *k, n in data.get("slices", ()):
            self.slices[tuple(k)] += n
        for name in ("late", "tokens", "produced"):
            counts: Counter[tuple[Any, ...]] = getattr(self, name)
            for *k, n in data.get(name, ()):
                counts[tuple(k)] += n
        self.endings.merge(data.get("endings") or {})
        self.write_records(data["records"])

    def write_records(self, by_side: dict[str, list[bytes]]) -> None:
        """Encoded requests.jsonl lines, each to its side's file."""
        for side, lines in by_side.items():
            writer = self.requests.get(side)
            if writer is None:
                continue
            for i in range(0, len(lines), YIELD_EVERY):
                writer.write(lines[i : i + YIELD_EVERY])
                gevent.sleep(0)

    def watch(self, process: str, samples: dict[str, Any]) -> None:
        """Add a process's self-watch samples (lists grow, counts add)."""
        g = self.generator.setdefault(process, {})
        for k, v in samples.items():
            g[k] = g[k] + v if k in g else v

    def side(self, target: str) -> Merged:
        """The part of the totals of one target (its histograms a view, its counts copied)."""
        view = Merged()
        view.hist = self.hist.select(target=target)
        view.outcomes.update({k: n for k, n in self.outcomes.items() if k[0] == target})
        view.slo_counts.update({k: n for k, n in self.slo_counts.items() if k[0] == target})
        view.slices.update({k: n for k, n in self.slices.items() if k[0] == target})
        view.late.update({k: n for k, n in self.late.items() if k[0] == target})
        view.tokens.update({k: n for k, n in self.tokens.items() if k[0] == target})
        view.produced.update({k: n for k, n in self.produced.items() if k[0] == target})
        view.endings = self.endings.of(target)
        view.generator = self.generator
        return view
