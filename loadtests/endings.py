"""How each (target, lang, api, phase)'s requests ended, for run.json's `endings`: which replica
answered, failovers, the KV cache's way to decode, stranded requests and the longest silences.

A worker's tally ships with its collector's data and adds into the master's exactly: counts add,
maxima take the larger, each KV way's TTFT and end are histograms (their p50s at the end).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from llmchaos import run as results
from llmchaos.histogram import HistogramSet, Key
from loadtests.record import RequestRecord

# counts: (target, lang, api, phase, what, name); what: requests, stranded, failed_over (name ""), replica,
# replica_failed (name the replica), kv (name the way); maxima: (target, lang, api, phase, "silent" | "end",
# way or "" for every request); the KV ways' histograms: way -> Key(target, lang, api, phase, "ttft" | "e2e")
Tally = tuple[str, ...]


class Endings:
    """One process's tally (or the run's, merged)."""

    def __init__(self) -> None:
        self.counts: Counter[Tally] = Counter()
        self.maxima: dict[Tally, float] = {}
        self.kv: dict[str, HistogramSet] = {}

    def add(self, rec: RequestRecord) -> None:
        """A request that ended (not one the end of the test cancelled)."""
        base = (rec.target, rec.lang, rec.api, rec.phase)
        self.counts[(*base, "requests", "")] += 1
        self.counts[(*base, "stranded", "")] += rec.outcome == "stranded"
        self.counts[(*base, "failed_over", "")] += rec.failed_over >= 1
        self._most((*base, "silent", ""), rec.silent_s)
        if rec.replica is not None:
            self.counts[(*base, "replica", rec.replica)] += 1
            self.counts[(*base, "replica_failed", rec.replica)] += rec.outcome != "ok"
        if rec.kv is not None:
            self.counts[(*base, "kv", rec.kv)] += 1
            self._most((*base, "silent", rec.kv), rec.silent_s)
            hist = self.kv.setdefault(rec.kv, HistogramSet())
            if rec.ttft is not None:
                hist.record(Key(*base, "ttft"), rec.ttft)
            if rec.end_s is not None:
                self._most((*base, "end", rec.kv), rec.end_s)
                hist.record(Key(*base, "e2e"), rec.end_s)

    def _most(self, key: Tally, value: float) -> None:
        self.maxima[key] = max(self.maxima.get(key, value), value)

    def drain(self) -> dict[str, Any]:
        """The tally since the last drain, encoded for the master (zero counts left out)."""
        counts, maxima, kv = self.counts, self.maxima, self.kv
        self.counts, self.maxima, self.kv = Counter(), {}, {}
        return {
            "counts": [[*k, n] for k, n in counts.items() if n],
            "maxima": [[*k, v] for k, v in maxima.items()],
            "kv": {way: hist.encode() for way, hist in kv.items()},
        }

    def merge(self, data: dict[str, Any]) -> None:
        """A worker's `drain`."""
        for *k, n in data.get("counts", ()):
            self.counts[tuple(k)] += n
        for *k, v in data.get("maxima", ()):
            self._most(tuple(k), v)
        for way, items in data.get("kv", {}).items():
            self.kv.setdefault(way, HistogramSet()).merge(HistogramSet.decode(items))

    def of(self, target: str) -> Endings:
        """One target's part (its histograms shared, not copied)."""
        view = Endings()
        view.counts.update({k: n for k, n in self.counts.items() if k[0] == target})
        view.maxima = {k: v for k, v in self.maxima.items() if k[0] == target}
        view.kv = {way: hist.select(target=target) for way, hist in self.kv.items()}
        return view

    def rows(self) -> list[results.Ending]:
        """run.json's `endings`: a row per key where a request named its replica or KV way, failed
        over or was stranded."""
        medians: dict[Tally, float] = {
            (*key[:4], key.metric, way): h.quantile(50) for way, hist in self.kv.items() for key, h in hist if h.count
        }
        return results.ending_rows(self.counts, self.maxima, medians)
