"""The GPUs' energy, read where the user says (`--energy-from`): a Prometheus (its HTTP API: the raw
samples of dcgm-exporter's counter, at the times they were scraped), a `/metrics` page itself
(dcgm-exporter's, or the reference server's: sampled here at a fixed interval and at every phase
edge) or a fault host's NVML counters (read with each of its acknowledgements). Either way each
GPU's readings are its cumulative joules at known times; where no GPU answers, they are absent with
the reason, never zero.

Hand-written: prometheus-client parses the exposition, but no kept library reads a range of raw
samples from Prometheus's API or matches a label selector against parsed samples.
"""

from __future__ import annotations

import itertools
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import gevent
import httpx
from prometheus_client.parser import text_string_to_metric_families

from llmchaos.errors import UsageError

ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since boot, a counter (dcgm-exporter's default-counters.csv)
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W, a gauge: integrated where a GPU has no energy counter
MODELLED = "llmchaos_power_model"  # a label only the reference server's modelled series carry
EDGE_POLL_S = 0.05  # how often the sampler looks for a phase edge
TIMEOUT_S = 5.0
LOOKBEHIND_S = 60.0  # raw samples are read from this long before the run (one before its start, to interpolate)
MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')

Series = dict[str, list[tuple[float, float]]]  # GPU -> (unix time, value), in time order


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def __call__(self, labels: dict[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op in ("=", "!="):
            return (have == self.value) == (self.op == "=")
        return (re.fullmatch(self.value, have) is not None) == (self.op == "=~")


def selector(text: str) -> list[Matcher]:
    """A PromQL label selector (`{UUID="GPU-1",Hostname=~"gpu-.*"}`, braces optional) as matchers;
    a UsageError naming `--energy-selector` when it is not one."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out, pos = [], 0
    while pos < len(body.rstrip()):
        m = MATCHER.match(body, pos)
        if m is None:
            raise UsageError(
                f'not a label selector at {body[pos:]!r} (e.g. {{Hostname="gpu-1"}})', field="--energy-selector"
            )
        value = bytes(m[3], "utf-8").decode("unicode_escape")
        if m[2] in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as e:
                raise UsageError(f"bad regular expression {value!r}: {e}", field="--energy-selector") from None
        out.append(Matcher(m[1], m[2], value))
        pos = m.end()
    return out


@dataclass
class Readings:
    """Each GPU's cumulative joules at the times read; `why` says what is missing (all of it: absent)."""

    origin: str
    joules: Series = field(default_factory=dict)
    modelled: bool = False
    method: str | None = None  # counter | power
    why: str | None = None

    @property
    def samples(self) -> int:
        return sum(len(s) for s in self.joules.values())

    @property
    def interval_s(self) -> float | None:
        gaps = [b[0] - a[0] for s in self.joules.values() for a, b in itertools.pairwise(s)]
        return statistics.median(gaps) if gaps else None


def gpu_key(labels: dict[str, str]) -> str:
    """The GPU a series is of: its UUID where it has one (with the instance that exported it)."""
    if "UUID" in labels:
        return labels["UUID"] + (f"@{labels['instance']}" if "instance" in labels else "")
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")


def cumulative(counter_mj: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A counter's samples (mJ) as joules since the first, a drop read as a reset to zero (Prometheus's
    `increase` does the same)."""
    out, total = [], 0.0
    for i, (t, v) in enumerate(counter_mj):
        if i:
            before = counter_mj[i - 1][1]
            total += (v - before if v >= before else v) / 1000.0
        out.append((t, total))
    return out


def integrated(power_w: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Power samples (W) as joules since the first, by the trapezoid rule."""
    out, total = [], 0.0
    for i, (t, w) in enumerate(power_w):
        if i:
            t0, w0 = power_w[i - 1]
            total += (t - t0) * (w + w0) / 2
        out.append((t, total))
    return out


def readings(origin: str, counters: Series, powers: Series, modelled: bool, why: str) -> Readings:
    """Readings from the energy counters, or from the power samples of GPUs that have none; absent
    (with `why`) where no GPU has two samples of either."""
    joules: Series = {g: cumulative(s) for g, s in counters.items() if len(s) >= 2}
    method = "counter" if joules else None
    if not joules:
        joules = {g: integrated(s) for g, s in powers.items() if len(s) >= 2}
        method = "power" if joules else None
    if not joules:
        return Readings(origin, why=why)
    return Readings(origin, joules, modelled, method)


def ours(page: str) -> str:
    """The lines of an exposition about the energy and power series (a server's page is mostly
    histograms: parsing all of it would take the event loop's time from the streams)."""
    return "".join(
        line + "\n"
        for line in page.splitlines()
        if line.startswith((ENERGY, POWER, f"# TYPE {ENERGY}", f"# TYPE {POWER}"))
    )


class Source:
    """Where the energy comes from: `sample` is called at the interval and at every phase edge, and
    `readings` once at the end."""

    origin: str

    def fresh(self) -> Source:
        """This source for a new test (a master runs one after another from its web UI)."""
        return self

    def sample(self) -> None:
        """Take a sample now (a page read here; Prometheus keeps its own)."""

    def readings(self, start: float, end: float) -> Readings:
        raise NotImplementedError


class Page(Source):
    """A `/metrics` page read here: each GPU's value at the time of the read (the middle of its round
    trip), the series matching the selector."""

    def __init__(self, url: str, matchers: list[Matcher]) -> None:
        self.url, self.matchers, self.origin = url, matchers, url
        self.counters: Series = {}
        self.powers: Series = {}
        self.modelled = False
        self.reads = 0
        self.failed: list[str] = []

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
        for family in text_string_to_metric_families(ours(page)):
            into = {ENERGY: self.counters, POWER: self.powers}.get(family.name)
            if into is None:
                continue
            for s in family.samples:
                if s.name in (ENERGY, ENERGY + "_total", POWER) and all(m(s.labels) for m in self.matchers):
                    into.setdefault(gpu_key(s.labels), []).append((t, s.value))
                    self.modelled |= MODELLED in s.labels

    def readings(self, start: float, end: float) -> Readings:
        failed = f"; {len(self.failed)} of {self.reads} reads failed ({self.failed[-1]})" if self.failed else ""
        why = f"no {ENERGY} or {POWER} series matching the selector on {self.url}{failed}"
        out = readings(self.origin, self.counters, self.powers, self.modelled, why)
        if out.why is None and failed:
            out.why = failed[2:]
        return out


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
            series.setdefault(gpu_key(labels), []).extend((float(t), float(v)) for t, v in item["values"])
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


@runtime_checkable
class HostCounters(Protocol):
    """Where a fault host's counters are kept on the master (faults/session.py's FaultSession)."""

    remote: list[str]  # the fault hosts its schedule names

    def energy(self, host: str) -> tuple[Series, str | None]: ...


class FaultHost(Source):
    """A fault host's NVML counters, read with each of its acknowledgements (every second and right
    after each window's apply and revert) and put on the master's clock; the selector matches its
    GPUs' `UUID` and `Hostname` (the host's name)."""

    def __init__(self, name: str, matchers: list[Matcher]) -> None:
        self.name, self.matchers, self.origin = name, matchers, f"fault host {name} (NVML)"
        self.counters: HostCounters | None = None

    def attach(self, counters: object) -> None:
        """The run's fault session, which must know this host (else a UsageError naming the flag)."""
        if not isinstance(counters, HostCounters) or self.name not in counters.remote:
            raise UsageError(f"no fault host {self.name!r} in --schedule", field="--energy-from")
        self.counters = counters

    def readings(self, start: float, end: float) -> Readings:
        if self.counters is None:
            return Readings(self.origin, why="not attached to the run's fault hosts")
        series, why = self.counters.energy(self.name)
        chosen = {g: s for g, s in series.items() if all(m({"UUID": g, "Hostname": self.name}) for m in self.matchers)}
        got = readings(self.origin, chosen, {}, False, f"no GPU energy from fault host {self.name}: {why}")
        if got.why is None:
            got.why = why
        return got


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
