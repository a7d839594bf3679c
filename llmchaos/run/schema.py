"""run.json as typed objects: what one run measured, per (target, lang, api, phase, metric).

Validated with pydantic on load, so a wrong field is an error that names it. Fields are only
ever added within one `schema_version`; readers ignore fields they do not know.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from llmchaos import __version__
from llmchaos.histogram import Histogram, HistogramSet, Key
from llmchaos.metrics import METRICS

SCHEMA_VERSION = 1


class Part(BaseModel):
    """A part of run.json: immutable, unknown fields ignored, written by its JSON names."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class Summary(Part):
    """Percentiles of one merged histogram (seconds, or tokens for output_tokens)."""

    target: str
    lang: str
    api: str
    phase: str
    metric: str
    unit: str
    count: int
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None

    @property
    def key(self) -> Key:
        return Key(self.target, self.lang, self.api, self.phase, self.metric)

    @classmethod
    def of(cls, key: Key, hist: Histogram) -> Summary:
        return cls.model_validate({**key._asdict(), "unit": METRICS[key.metric].unit, **hist.summary()})


class OutcomeCount(Part):
    target: str
    lang: str
    api: str
    phase: str
    outcome: str
    count: int


class SloCheck(Part):
    """One percentile SLO of a language against its merged histogram over every phase."""

    slo: str  # e.g. ttft_p99_ms
    threshold_ms: float
    value_ms: float | None
    passed: bool = Field(alias="pass")


class SloResult(Part):
    """A (target, lang, api)'s SLOs: every check, attainment and goodput (failures count as misses;
    requests the end of the test cancelled are not issued, and counted apart)."""

    target: str
    lang: str
    api: str
    issued: int
    cancelled_at_stop: int = 0
    attained: int
    attainment: float | None
    goodput_rps: float | None
    checks: tuple[SloCheck, ...]
    passed: bool = Field(alias="pass")


class FaultWindow(Part):
    """A fault window as it ran (unix times), filled in by the fault runner as it runs; actual times
    are None where it never started or ended."""

    model_config = ConfigDict(frozen=False, extra="ignore")

    name: str
    kind: str
    target: dict[str, Any]
    params: dict[str, Any]
    planned_start: float
    planned_end: float
    actual_start: float | None = None
    actual_end: float | None = None
    error: str | None = None


class GuardTrip(Part):
    """The live guard fired (`--guard`): a language's percentile stayed over its threshold for
    `len(windows_ms)` consecutive windows (unix times; `phase` the one the trip fell in)."""

    target: str
    lang: str
    metric: str
    percentile: float
    threshold_ms: float
    window_s: float
    windows_ms: tuple[float, ...]
    started: float  # the first window over the threshold began
    tripped: float  # the last of them ended
    phase: str
    actions: tuple[str, ...]  # record, mark, webhook <status>, stop
    recovered: float | None = None  # the first window back under the threshold ended (marked spans end here)


class Validity(Part):
    valid: bool
    flags: tuple[str, ...] = ()  # e.g. generator_saturated:<process>, reads_coalesced:<process>
    reasons: tuple[str, ...] = ()  # one line per flag: the figure measured against its limit


class Reads(Part):
    """The generator's socket reads of stream bodies that brought content events, and those that
    brought several (coalesced: one kernel receive stamp for all, so the gaps between them are lost)."""

    reads: int = 0
    coalesced: int = 0


class RequestsFile(Part):
    file: str = "requests.jsonl"
    sample_rate: float = 1.0
    written: int = 0


# -- a replay's side (locust -f loadtests/replay/locustfile.py): fields added within schema_version 1 ----------
class Lag(Part):
    """Schedule lag (actual send minus intended start), seconds, over the side's requests."""

    count: int
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None


class Minute(Part):
    """One minute of the replay (from its start): requests the log had due then, and sent then."""

    minute: int
    recorded: int
    sent: int


class Fidelity(Part):
    """How faithfully the log's schedule was kept: lag percentiles, and per minute the requests due
    (the log's rate, sped up) against those sent."""

    lag: Lag
    per_minute: list[Minute] = []
    recorded: int = 0  # requests due over the run
    sent: int = 0
    rate_error_max: float | None = None  # largest |sent / recorded - 1| over the whole minutes
    held_by_session: int = 0  # turns that waited for their session's turn before (--session-order strict)


class OutputLength(Part):
    """Per language: output tokens asked for (max_tokens) and delivered, over the finished requests."""

    lang: str
    requests: int
    requested: int
    delivered: int
    short: int  # requests delivered fewer than they asked for


class MirrorPairs(Part):
    """Per language, mirrored requests answered on both sides: how many had the same text."""

    lang: str
    pairs: int
    identical: int
    output_tokens_a: int
    output_tokens_b: int


class Replay(Part):
    """One side of a replay: the log, how users were split, and what the side saw of the schedule."""

    side: str  # a | b
    mode: str  # single | split | mirror
    log: str
    format: str
    targets: dict[str, str]  # side -> URL
    split: float | None = None  # percent of users sent to B
    salt: str = ""
    speed: float = 1.0
    window: dict[str, float | None] = {}
    loop: int = 1
    sample: float = 1.0
    session_order: str = "strict"
    fidelity: Fidelity
    output_lengths: list[OutputLength] = []
    mirror: list[MirrorPairs] = []
    log_problems: dict[str, Any] = {}


class Run(Part):
    """The whole of run.json."""

    schema_version: int = SCHEMA_VERSION
    harness_version: str = __version__
    run_id: str
    start: str  # RFC 3339
    end: str
    duration_s: float
    command: list[str]
    config: dict[str, Any]
    targets: list[str]
    api: str
    load_profile: dict[str, Any]
    seeds: dict[str, Any]
    host: dict[str, Any]
    generator: dict[str, Any]  # per process: CPU and event-loop lag
    validity: Validity
    reads: Reads = Reads()
    faults: list[FaultWindow] = []
    outcomes: list[OutcomeCount] = []
    slo: list[SloResult] = []
    requests: RequestsFile = RequestsFile()
    summaries: list[Summary] = []
    replay: Replay | None = None  # a replay's side: one of its results directories
    guard: list[GuardTrip] = []  # the live guard's trips (--guard)

    def summary(self, key: Key) -> Summary | None:
        return next((s for s in self.summaries if s.key == key), None)

    def iter_summaries(self, **match: str) -> Iterator[Summary]:
        """Summaries whose key fields equal `match`, e.g. `metric="ttft", lang="de"`."""
        return (s for s in self.summaries if all(getattr(s, f) == v for f, v in match.items()))


def summarize(hist: HistogramSet) -> list[Summary]:
    """One summary per histogram, in key order."""
    return [Summary.of(key, h) for key, h in sorted(hist, key=lambda kv: kv[0])]


def outcome_rows(counts: Mapping[tuple[str, ...], int]) -> list[OutcomeCount]:
    """Counts keyed (target, lang, api, phase, outcome) as rows, in key order."""
    fields = ("target", "lang", "api", "phase", "outcome")
    return [OutcomeCount(**dict(zip(fields, k, strict=True)), count=n) for k, n in sorted(counts.items())]
