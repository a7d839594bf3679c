"""A `/metrics` page (dcgm-exporter's, or the reference server's) read by the master itself: each
GPU's value at the time of the read, every `--energy-interval` and at each phase edge."""

from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

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
from loadtests.energy.selector import Matcher

ABSENT = ("# DCGM_FI_DEV_* gauges absent: ", f"# absent: {ENERGY}: ")  # the reference server's word on why


def ours(page: str) -> str:
    """The lines of an exposition about the energy and power series (a server's page is mostly
    histograms: parsing all of it would take the event loop's time from the streams)."""
    return "".join(
        line + "\n"
        for line in page.splitlines()
        if line.startswith((ENERGY, POWER, f"# TYPE {ENERGY}", f"# TYPE {POWER}"))
    )


def said_absent(page: str) -> str | None:
    """What the page says of its GPU series' absence (the reference server's comment), if anything."""
    return next((line.split(": ", 1)[1] for line in page.splitlines() if line.startswith(ABSENT)), None)


class Page(Source):
    """A `/metrics` page read here: each GPU's value at the time of the read (the middle of its round
    trip), the series matching the selector."""

    live = True

    def __init__(self, url: str, matchers: list[Matcher]) -> None:
        self.url, self.matchers, self.origin = url, matchers, url
        self.counters: Series = {}
        self.powers: Series = {}
        self.modelled = False
        self.reads = 0
        self.failed: list[str] = []
        self.absent: str | None = None  # the page's own word on why it has no energy

    def fresh(self) -> Page:
        return Page(self.url, self.matchers)

    def sample(self) -> None:
        self.reads += 1
        sent = time.time()
        try:
            r = httpx.get(self.url, timeout=TIMEOUT_S)
            r.raise_for_status()
            self.absorb(r.text, (sent + time.time()) / 2)
        except (httpx.HTTPError, ValueError) as e:  # a read that fails is counted, never a crash
            self.failed.append(f"{type(e).__name__}: {e}")

    def absorb(self, page: str, t: float) -> None:
        """The energy and power samples of one read of the page, at time `t`."""
        self.absent = said_absent(page) or self.absent
        for family in text_string_to_metric_families(ours(page)):
            into = {ENERGY: self.counters, POWER: self.powers}.get(family.name)
            if into is None:
                continue
            for s in family.samples:
                selected = all(m(s.labels) for m in self.matchers)
                if s.name in (ENERGY, ENERGY + "_total", POWER) and selected and figure(s.value):
                    into.setdefault(gpu_key(s.labels), []).append((t, s.value))
                    self.modelled |= MODELLED in s.labels

    def readings(self, start: float, end: float) -> Readings:
        failed = f"; {len(self.failed)} of {self.reads} reads failed ({self.failed[-1]})" if self.failed else ""
        said = f" (it says: {self.absent})" if self.absent else ""
        why = f"no {ENERGY} or {POWER} series matching the selector on {self.url}{said}{failed}"
        out = readings(self.origin, self.counters, self.powers, self.modelled, why)
        if out.why is None and failed:
            out.why = failed[2:]
        return out
