"""Per-process collection of request records, shipped to the master (or merged in place)."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import gevent

from llmchaos import bounds, recovery, slo
from llmchaos.histogram import HistogramSet, Key
from llmchaos.metrics import per_turn
from loadtests.endings import Endings
from loadtests.record import RequestRecord, count_batch

YIELD_EVERY = 64  # records encoded or written between yields to the event loop while streams run
TICKS_PER_S = 10  # output tokens are tallied per tenth of a second (loadtests/energy/ shares energy by them)


class Collector:
    """Histograms, outcome counts, SLO counts, endings and sampled records of this process's requests."""

    def __init__(self, slos: slo.Slos, sample_rate: float = 1.0, seed: int = 0) -> None:
        self.slos, self.sample_rate = slos, sample_rate
        self._rng = random.Random(seed)
        self.hist = HistogramSet()
        self.outcomes: Counter[tuple[str, ...]] = Counter()  # (target, lang, api, phase, outcome)
        self.slo_counts: Counter[tuple[str, ...]] = Counter()  # (target, lang, api, phase, issued|met|at_stop|canary)
        # (target, lang, api, phase, late:<metric>:<as>:<counter>): samples the generator's reads can have moved,
        # by histogram counter (the validity's error bar, llmchaos/bounds.py)
        self.late: Counter[tuple[str, ...]] = Counter()
        self.slices: Counter[tuple[Any, ...]] = Counter()  # (target, lang, api, SLO key, second, n|over)
        self.tokens: Counter[tuple[Any, ...]] = Counter()  # (target, lang, api, phase, tick): output tokens produced
        self.produced: Counter[tuple[str, ...]] = Counter()  # (target, lang, api, phase): requests that produced any
        self.endings = Endings()  # run.json's `endings`: replicas, failovers, KV ways, stranded, silences
        self.records: list[RequestRecord] = []

    def add(self, rec: RequestRecord) -> None:
        base = (rec.target, rec.lang, rec.api, rec.phase)
        samples = rec.samples()
        for metric, values in samples.items():
            if values:
                self.hist.record_many(Key(*base, metric), values)
        per_chunk = rec.tokens_per_chunk() if rec.chunks else []  # once: ITL's spread and the tally's times
        spread = rec.itl_spread(per_chunk) if rec.outcome == "ok" and rec.gaps else ([], [])
        if spread[0]:
            self.hist.record_many(Key(*base, "itl"), *spread)
            if rec.turn is not None:
                self.hist.record_many(Key(*base, per_turn("itl", rec.turn)), *spread)
        self.outcomes[(*base, rec.outcome)] += 1
        if times := rec.token_times(per_chunk):
            self.produced[base] += 1
            for t, n in times:
                self.tokens[(*base, math.floor(t * TICKS_PER_S))] += n
        if rec.late_spans:
            ttft, itl = rec.late_errors()
            if ttft and rec.ttft is not None:
                for key in bounds.late_keys("ttft", rec.ttft, ttft, 0.0):
                    self.late[(*base, key)] += 1
            for value, less, more, n in itl:
                for key in bounds.late_keys("itl", value, less, more):
                    self.late[(*base, key)] += n
        if rec.at_stop:
            self.slo_counts[(*base, "at_stop")] += 1
        else:
            self.endings.add(rec)
            self.slo_counts[(*base, "issued")] += 1
            if rec.canary is not None:
                self.slo_counts[(*base, "canary")] += 1
            if rec.attains(self.slos.get(rec.lang, {})):
                self.slo_counts[(*base, "met")] += 1
            if rec.outcome != "cancelled":
                self._tally(rec, samples, spread)
        if self.sample_rate >= 1.0 or self._rng.random() < self.sample_rate:
            self.records.append(rec)

    def _tally(
        self, rec: RequestRecord, samples: dict[str, list[float]], spread: tuple[list[float], list[int]]
    ) -> None:
        """The request's samples (its histograms', ITL's `spread`) against each SLO of its language,
        in its start's second; a failure is one sample over every threshold (llmchaos/recovery.py)."""
        second = int(rec.intended)
        for key, ms in self.slos.get(rec.lang, {}).items():
            metric = slo.metric_of(key)
            if rec.outcome != "ok":
                n, over = 1, 1
            elif metric == "itl":
                n, over = recovery.over(*spread, ms / 1000.0)
            else:
                n, over = recovery.over(samples.get(metric, []), None, ms / 1000.0)
            if n:
                self.slices[(rec.target, rec.lang, rec.api, key, second, "n")] += n
            if over:
                self.slices[(rec.target, rec.lang, rec.api, key, second, "over")] += over

    def take_records(self, streaming: bool = True) -> dict[str, list[bytes]]:
        """Sampled records as encoded requests.jsonl lines, per side (see `encode`)."""
        recs, self.records = self.records, []
        return encode(recs, streaming)

    def drain(self, streaming: bool = True) -> dict[str, Any]:
        """A worker's data since its last report, encoded for the master. Everything is taken at
        once, before the first yield: a request that ends meanwhile goes whole into the next report.
        While streams are in flight it yields to the event loop between histograms, so they are
        read on time."""
        hist, outcomes, slo_counts, recs = self.hist.drain(), self.outcomes, self.slo_counts, self.records
        slices, late, tokens, produced = self.slices, self.late, self.tokens, self.produced
        self.outcomes, self.slo_counts, self.slices, self.late = Counter(), Counter(), Counter(), Counter()
        self.tokens, self.produced = Counter(), Counter()
        self.records = []
        items = []
        for key, h in hist:
            items.append({**key._asdict(), **h.encode()})
            if streaming:
                gevent.sleep(0)
        return {
            "hist": items,
            "outcomes": [[*k, n] for k, n in outcomes.items()],
            "slo": [[*k, n] for k, n in slo_counts.items()],
            "slices": [[*k, n] for k, n in slices.items()],
            "late": [[*k, n] for k, n in late.items()],
            "tokens": [[*k, n] for k, n in tokens.items()],
            "produced": [[*k, n] for k, n in produced.items()],
            "endings": self.endings.drain(),
            "records": encode(recs, streaming),
        }


def encode(recs: list[RequestRecord], streaming: bool) -> dict[str, list[bytes]]:
    """Records as requests.jsonl lines per side; our own token counts of the texts their requests
    left uncounted (short ones: see `RequestRecord.count_tokens`) computed in one batch (in a native
    thread while streams are in flight: the tokenizer releases the GIL, the event loop goes on)."""
    if not recs:
        return {}
    todo = [r for r in recs if r.own_total is None and r.chunks and not r.uncounted]
    for r, n in zip(todo, count_batch([r.text for r in todo], off_loop=streaming), strict=True):
        r.own_total = n
    lines: dict[str, list[bytes]] = {}
    for i, r in enumerate(recs, 1):
        lines.setdefault(r.side, []).append(r.line().encode())
        if streaming and i % YIELD_EVERY == 0:
            gevent.sleep(0)
    return lines
