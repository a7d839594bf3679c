"""The source `--energy-from` names, and its sampling over a run."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import gevent
import httpx

from llmchaos.errors import UsageError
from loadtests.energy.host import FaultHost
from loadtests.energy.page import Page
from loadtests.energy.prometheus import Prometheus
from loadtests.energy.readings import Readings, Source
from loadtests.energy.selector import selector

EDGE_POLL_S = 0.05  # how often the sampler looks for a phase edge


def source(url: str, text: str) -> Source:
    """The source `--energy-from` names: `host:NAME` a fault host; a page when its path ends in
    /metrics; else a Prometheus."""
    matchers = selector(text)  # checked for all: a Prometheus would refuse it only at the end
    if url.startswith("host:"):
        return FaultHost(url.removeprefix("host:"), matchers)
    if not re.match(r"https?://", url):
        raise UsageError(f"not an http(s) URL: {url!r}", field="--energy-from")
    if httpx.URL(url).path.rstrip("/").endswith("/metrics"):
        return Page(url, matchers)
    return Prometheus(url, text)


class Sampler:
    """Samples a source every `interval` seconds and at each phase edge (`edges` changes value)."""

    def __init__(self, src: Source, interval: float, edges: Callable[[], object] | None) -> None:
        self.source, self.interval, self.edges = src, interval, edges
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        self.source.sample()
        if self.source.live:  # a Prometheus or a fault host reads on its own: nothing to poll for
            self._greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        last, due = self.edges() if self.edges else None, time.monotonic() + self.interval
        while True:
            gevent.sleep(EDGE_POLL_S if self.edges else self.interval)
            now_edges = self.edges() if self.edges else None
            if now_edges != last or time.monotonic() >= due:
                last, due = now_edges, time.monotonic() + self.interval
                self.source.sample()

    def stop(self, start: float, end: float) -> Readings:
        """The last sample, then the readings over [start, end]."""
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None
        self.source.sample()
        return self.source.readings(start, end)
