"""Per-process collection of request records, shipped to the master and merged exactly."""

from __future__ import annotations

import random
from collections import Counter
from typing import IO

import gevent
import orjson

from llmchaos import tokenizer
from llmchaos.histogram import HistogramSet, Key
from loadtests import slo
from loadtests.record import RequestRecord


class Collector:
    """Histograms, outcome counts, SLO counts and sampled records of this process's requests."""

    def __init__(self, slos: slo.Slos, sample_rate: float = 1.0, seed: int = 0) -> None:
        self.slos, self.sample_rate = slos, sample_rate
        self._rng = random.Random(seed)
        self.hist = HistogramSet()
        self.outcomes: Counter[tuple[str, ...]] = Counter()  # (target, lang, api, phase, outcome)
        self.slo_counts: Counter[tuple[str, ...]] = Counter()  # (target, lang, api, phase, issued|met)
        self.records: list[RequestRecord] = []

    def add(self, rec: RequestRecord) -> None:
        base = (rec.target, rec.lang, rec.api, rec.phase)
        for metric, values in rec.samples().items():
            if values:
                self.hist.record_many(Key(*base, metric), values)
        self.outcomes[(*base, rec.outcome)] += 1
        self.slo_counts[(*base, "issued")] += 1
        if slo.attained(rec, self.slos.get(rec.lang, {})):
            self.slo_counts[(*base, "met")] += 1
        if self.sample_rate >= 1.0 or self._rng.random() < self.sample_rate:
            self.records.append(rec)

    def take_records(self, streaming: bool = True) -> list[dict]:
        """Sampled records as JSON lines, our own token counts computed in one batch (in a native
        thread while streams are in flight: the tokenizer releases the GIL, the event loop goes on)."""
        recs, self.records = self.records, []
        texts = [r.text for r in recs]
        if not recs:
            own: list[int] = []
        elif streaming:
            own = gevent.get_hub().threadpool.apply(tokenizer.count_batch, (texts,))
        else:
            own = tokenizer.count_batch(texts)
        return [r.to_json(n) for r, n in zip(recs, own)]

    def report(self, streaming: bool = True) -> dict:
        """A worker's data since its last report, encoded for the master. While streams are in
        flight it yields to the event loop between histograms, so they are read on time."""
        items = []
        for key, h in self.hist.drain():
            items.append({**key._asdict(), **h.encode()})
            if streaming:
                gevent.sleep(0)
        out = {"hist": items, "outcomes": [[*k, n] for k, n in self.outcomes.items()],
               "slo": [[*k, n] for k, n in self.slo_counts.items()], "records": self.take_records(streaming)}
        self.outcomes, self.slo_counts = Counter(), Counter()
        return out


class Merged:
    """The run's totals: the master's merge of its workers, or a single process's own collector."""

    def __init__(self, records_file: IO[bytes] | None = None, local: Collector | None = None) -> None:
        self.hist = local.hist if local else HistogramSet()
        self.outcomes: Counter[tuple[str, ...]] = local.outcomes if local else Counter()
        self.slo_counts: Counter[tuple[str, ...]] = local.slo_counts if local else Counter()
        self.records_file = records_file
        self.records_written = 0

    def merge(self, data: dict) -> None:
        """Add a worker's report; HDR histograms add bucket by bucket, so the merge is exact."""
        for item in data["hist"]:
            self.hist.merge(HistogramSet.decode([item]))
            gevent.sleep(0)
        for *k, n in data["outcomes"]:
            self.outcomes[tuple(k)] += n
        for *k, n in data["slo"]:
            self.slo_counts[tuple(k)] += n
        self.write_records(data["records"])

    def write_records(self, records: list[dict]) -> None:
        if self.records_file is not None:
            for i, r in enumerate(records):
                self.records_file.write(orjson.dumps(r) + b"\n")
                if i % 64 == 63:
                    gevent.sleep(0)
            self.records_written += len(records)
