"""A Prometheus's raw samples of the GPUs' counter over the run, each at the time it was scraped.

Hand-written: no kept library reads a range of raw samples from Prometheus's HTTP API."""

from __future__ import annotations

import time

import gevent
import httpx

from loadtests.energy.readings import (
    ENERGY,
    MODELLED,
    POWER,
    TIMEOUT_S,
    Readings,
    Series,
    Source,
    figure,
    gpu_key,
    readings,
)

LOOKBEHIND_S = 60.0  # raw samples are read from this long before the run (one before its start, to interpolate)


class Prometheus(Source):
    """A Prometheus's raw samples of the counter over the run (a range selector), waiting at the end
    until every GPU has been scraped past it (at most two scrape intervals and a second)."""

    def __init__(self, url: str, text: str, wait_s: float = 30.0) -> None:
        self.url, self.selector, self.wait_s = url.rstrip("/"), text.strip(), wait_s
        self.origin = f"{self.url} {self.selector}".strip()

    def raw(self, metric: str, start: float) -> tuple[Series, bool]:
        """The raw samples of `metric` from a minute before `start` until now (what a range selector
        returns: each value at the time it was scraped)."""
        span_ms = int((time.time() - start + LOOKBEHIND_S) * 1000)
        query = f"{metric}{self.selector}[{span_ms}ms]"
        r = httpx.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=TIMEOUT_S)
        r.raise_for_status()
        body = r.json()
        if body.get("status") != "success":
            raise ValueError(body.get("error", "query failed"))
        series: Series = {}
        modelled = False
        for item in body["data"]["result"]:
            labels = item["metric"]
            points = ((float(t), float(v)) for t, v in item["values"])
            series.setdefault(gpu_key(labels), []).extend(p for p in points if figure(p[1]))
            modelled |= MODELLED in labels
        return series, modelled

    def fetch(self, start: float) -> Readings:
        counters, modelled = self.raw(ENERGY, start)
        powers, modelled_power = ({}, False) if counters else self.raw(POWER, start)
        why = f"no {ENERGY} or {POWER}{self.selector} in Prometheus {self.url} over the run"
        return readings(self.origin, counters, powers, modelled or modelled_power, why)

    def readings(self, start: float, end: float) -> Readings:
        waited = time.time()
        while True:
            try:
                got = self.fetch(start)
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
                return Readings(self.origin, why=f"Prometheus {self.url}: {type(e).__name__}: {e}")
            if not got.joules or min(s[-1][0] for s in got.joules.values()) >= end:
                return got
            step = got.interval_s or 1.0
            if time.time() >= min(waited + self.wait_s, end + 2 * step + 1.0):
                got.why = f"not every GPU was scraped after the run's end (waited {time.time() - waited:.1f} s)"
                return got
            gevent.sleep(min(step / 4, 1.0))
