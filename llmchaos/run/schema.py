"""run.json as typed objects: what one run measured, per (target, lang, api, phase, metric).

Validated with pydantic on load, so a wrong field is an error that names it. Fields are only
ever added within one `schema_version`; readers ignore fields they do not know.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from llmchaos import __version__
from llmchaos.headers import KV_WAYS
from llmchaos.histogram import Histogram, Key
from llmchaos.metrics import METRICS

SCHEMA_VERSION = 1


def _rfc3339(text: str) -> str:
    datetime.fromisoformat(text)  # a ValueError names the field
    return text


Time = Annotated[str, AfterValidator(_rfc3339)]


def _unique(rows: Iterator[tuple[str, ...]], what: str) -> None:
    """ValueError at the first key seen twice (a duplicate would count its requests twice)."""
    seen: set[tuple[str, ...]] = set()
    for key in rows:
        if key in seen:
            raise ValueError(f"{what} {'/'.join(key)} twice")
        seen.add(key)


class Part(BaseModel):
    """A part of run.json: immutable, unknown fields ignored, written by its JSON names; every float
    finite (a NaN or an infinity is no figure a run measured)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True, allow_inf_nan=False)

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
    count: NonNegativeInt
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
    count: NonNegativeInt
    at_stop: NonNegativeInt | None = None  # of `count`, those the end of the test cancelled (None: not written)

    @model_validator(mode="after")
    def _within(self) -> OutcomeCount:
        if self.at_stop and (self.outcome != "cancelled" or self.at_stop > self.count):
            raise ValueError(f"at_stop {self.at_stop} of {self.count} {self.outcome}")
        return self


class CanaryCount(Part):
    """Canaries (--canary-rate) sent in one phase, and those answered `wrong`: whole, failing their check."""

    target: str
    lang: str
    api: str
    phase: str
    sent: NonNegativeInt
    wrong: NonNegativeInt

    @model_validator(mode="after")
    def _within(self) -> CanaryCount:
        if self.wrong > self.sent:
            raise ValueError(f"wrong {self.wrong} of {self.sent} sent")
        return self


def _kv_way(text: str) -> str:
    if text not in KV_WAYS:
        raise ValueError(f"a KV way must be one of {', '.join(KV_WAYS)}, got {text!r}")
    return text


KvWay = Annotated[str, AfterValidator(_kv_way)]


class ReplicaEnding(Part):
    """The requests one replica answered (the response header named it), and those not ok."""

    requests: NonNegativeInt
    failed: NonNegativeInt

    @model_validator(mode="after")
    def _within(self) -> ReplicaEnding:
        if self.failed > self.requests:
            raise ValueError(f"failed {self.failed} of {self.requests} requests")
        return self


class KvEnding(Part):
    """The requests whose decode engine got the prompt's KV cache one way (x-llmchaos-kv), and how
    long they took from their intended start: TTFT (None: none had a token) and end at p50, the
    end's max, and their longest silence."""

    requests: NonNegativeInt
    ttft_p50_s: NonNegativeFloat | None = None
    end_p50_s: NonNegativeFloat | None = None
    end_max_s: NonNegativeFloat | None = None
    silent_max_s: NonNegativeFloat = 0.0


class SessionCount(Part):
    """One (target, lang, api)'s conversations (--sessions) and how each ended: every turn answered
    (`completed`), a turn that failed (`cut_failed`: the conversation cannot go on), or the test's
    end (`cut_stop`), never counted as a short session. `turns`: the turns they sent (each a user
    message); `tool_hops`: the requests beyond those that sent tools' results (--tool-rate)."""

    target: str
    lang: str
    api: str
    started: NonNegativeInt
    completed: NonNegativeInt
    cut_failed: NonNegativeInt
    cut_stop: NonNegativeInt
    turns: NonNegativeInt
    tool_hops: NonNegativeInt = 0

    @model_validator(mode="after")
    def _each_ends_once(self) -> SessionCount:
        if self.completed + self.cut_failed + self.cut_stop != self.started:
            raise ValueError("sessions: completed, cut_failed and cut_stop must add up to started")
        if self.turns < self.started:
            raise ValueError("sessions: fewer turns than sessions started")
        return self


class Ending(Part):
    """How one (target, lang, api, phase)'s requests ended on a cluster (the client's view): how many
    were stranded (no byte for the stall limit before any content, then no answer) or failed over,
    the longest silence, per replica and per KV way. Only where a request said any of it."""

    target: str
    lang: str
    api: str
    phase: str
    requests: NonNegativeInt
    stranded: NonNegativeInt = 0
    failed_over: NonNegativeInt = 0  # requests that the router failed over at least once
    silent_max_s: NonNegativeFloat = 0.0
    replicas: dict[str, ReplicaEnding] = {}
    kv: dict[KvWay, KvEnding] = {}

    @model_validator(mode="after")
    def _within(self) -> Ending:
        for name, n in (
            ("stranded", self.stranded),
            ("failed_over", self.failed_over),
            ("replicas", sum(r.requests for r in self.replicas.values())),
            ("kv", sum(k.requests for k in self.kv.values())),
        ):
            if n > self.requests:
                raise ValueError(f"{name}: {n} of {self.requests} requests")
        return self


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
    issued: NonNegativeInt
    cancelled_at_stop: NonNegativeInt = 0
    attained: NonNegativeInt
    attainment: float | None
    goodput_rps: float | None
    checks: tuple[SloCheck, ...]
    passed: bool | None = Field(alias="pass")  # None: no request issued, no verdict ("no data")

    @property
    def verdict(self) -> str:
        return "no data" if self.passed is None else "pass" if self.passed else "FAIL"

    @model_validator(mode="after")
    def _attained_of_issued(self) -> SloResult:
        if self.attained > self.issued:
            raise ValueError(f"attained {self.attained} of {self.issued} issued")
        return self


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
    # a window on a fault host (target.host): actual_start/actual_end are its acknowledged apply and
    # revert on the master's clock; requests started in `unconfirmed` are in phase NAME:unconfirmed
    host: str | None = None
    spans: list[tuple[float, float | None]] = []  # each time the host had it applied, acknowledged
    unconfirmed: list[tuple[float, float]] = []  # stretches the master could not confirm (lost contact)
    apply_ack_lag_s: float | None = None  # from the intended start to the master hearing it applied
    revert_ack_lag_s: float | None = None  # from the intended end to the master hearing it reverted
    why: str | None = None  # why the host last reverted it


class FaultHost(Part):
    """A fault host the run's schedule named, as the master knew it at the end."""

    name: str
    connected: bool  # it said hello
    offset_s: float | None = None  # its clock minus the master's (NTP-style, from the leases' round trips)
    uncertainty_s: float | None = None  # the true offset lies within offset_s +- this
    round_trip_s: float | None = None  # the round trip the estimate came from (the least recent one)
    acks: int = 0
    lost_contact: list[tuple[float, float | None]] = []  # no ack for a while: [from, to] (None: never again)
    reach: dict[str, Any] = {}  # what it said it may touch


class GuardTrip(Part):
    """The live guard fired (`--guard`): a language's percentile stayed over its threshold for
    `len(windows_ms)` consecutive windows (unix times; `phase` the one the trip fell in), or, with
    `fault`, was still over `recover_within` after that fault window's revert (`started`)."""

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
    fault: str | None = None  # a recover_within trip: the fault window it was not back from


class Recovery(Part):
    """How fast a (target, lang, api) broke and came back against one SLO, around one fault window
    (llmchaos/recovery.py): seconds from its start to the end of the first evaluation window over
    the SLO (None: none was), and from its revert to the first of `windows` consecutive windows
    within it (None, `recovered` false: not within the run)."""

    window: str
    target: str
    lang: str
    api: str
    metric: str  # the SLO key, e.g. ttft_p99_ms
    window_s: PositiveFloat
    windows: PositiveInt
    detect_s: NonNegativeFloat | None
    recover_s: NonNegativeFloat | None
    recovered: bool
    judged: NonNegativeInt  # windows from its start to the run's end with enough samples to judge
    needed: PositiveInt  # samples a window needed
    stranded: NonNegativeInt = 0  # requests started in its phase that got no answer in time
    burn: NonNegativeFloat | None = None  # its share of samples over the threshold / the share allowed
    reverted: float | None = None  # unix time of the window's revert (None: still on at the end)

    @model_validator(mode="after")
    def _recovered_when_back(self) -> Recovery:
        if self.recovered != (self.recover_s is not None):
            raise ValueError(f"recovered is {self.recovered} with recover_s {self.recover_s}")
        return self


class Bound(Part):
    """The generator's error bar on one percentile (llmchaos/bounds.py): the true value lies within
    [low_ms, high_ms]; `uncertain`, the share of samples around reads of several events (one stamp)."""

    target: str
    lang: str
    api: str
    metric: str
    percentile: float
    value_ms: NonNegativeFloat
    low_ms: NonNegativeFloat
    high_ms: NonNegativeFloat
    uncertain: NonNegativeFloat
    phase: str | None = None  # None: over every phase, as the SLO checks are

    @model_validator(mode="after")
    def _around(self) -> Bound:
        if not self.low_ms <= self.value_ms <= self.high_ms or self.uncertain > 1:
            raise ValueError(
                f"needs low_ms <= value_ms <= high_ms and uncertain <= 1, got {self.low_ms}, {self.value_ms}, "
                f"{self.high_ms} and {self.uncertain}"
            )
        return self


class Validity(Part):
    valid: bool
    flags: tuple[str, ...] = ()  # e.g. generator_saturated:<process>, bound_material:<lang>
    reasons: tuple[str, ...] = ()  # one line per flag: the figure measured against its limit
    unjudged: tuple[str, ...] = ()  # one line per process with too few samples of a figure to judge it
    bounds: tuple[Bound, ...] = ()  # the generator's error bar on TTFT and ITL (llmchaos/bounds.py)


class PhaseReads(Part):
    """A phase's stream reads: how the network delivered its events (a burst or a proxy's hold
    brings several at once), and how many of them the generator took late."""

    phase: str
    reads: NonNegativeInt = 0
    coalesced: NonNegativeInt = 0
    late: NonNegativeInt = 0


class Reads(Part):
    """The generator's socket reads of stream bodies that brought content events, those that
    brought several (coalesced: one kernel receive stamp for all, so the gaps between them are lost)
    and, of those, the ones it took late (their first bytes can have waited 1 ms or more: the generator's
    doing, not the network's). `late` and `phases` were added within schema_version 1."""

    reads: NonNegativeInt = 0
    coalesced: NonNegativeInt = 0
    late: NonNegativeInt = 0
    phases: tuple[PhaseReads, ...] = ()


class RequestsFile(Part):
    file: str = "requests.jsonl"
    sample_rate: float = Field(1.0, ge=0.0, le=1.0)
    written: NonNegativeInt = 0


# -- a replay's side (locust -f loadtests/replay/locustfile.py): fields added within schema_version 1 ----------
class Lag(Part):
    """Percentiles of a time over the side's requests, seconds: schedule lag (actual send minus
    intended start), or the build or send of its requests."""

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
    prepare: Lag | None = None  # building each request ahead of its time (its prompt): not in the lag
    send: Lag | None = None  # from each send to its last byte written: a long prompt's, apart from the target's


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


SOURCES = ("measured", "modelled", "absent")
J_PER_KWH = 3.6e6


def usd(gpu_s: float, joules: float, per_gpu_hour: float | None, per_kwh: float | None) -> float | None:
    """What GPU-seconds and joules cost: GPU-hours at the price per GPU-hour plus kWh at the price per
    kWh (a price not given: none of it); None when neither price is given."""
    if per_gpu_hour is None and per_kwh is None:
        return None
    return gpu_s / 3600 * (per_gpu_hour or 0.0) + joules / J_PER_KWH * (per_kwh or 0.0)


def _source(text: str) -> str:
    if text not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {text!r}")
    return text


Source = Annotated[str, AfterValidator(_source)]


class Cost(Part):
    """What one (target, lang, api, phase)'s output tokens cost: the energy of each sampling interval
    shared out by the tokens produced in it (loadtests/energy/attribute.py), and the GPU time likewise; money from
    the run's prices. `source`: measured (a GPU's counter), modelled (the stand-in's power model) or
    absent (no counter: every figure None, `why` says why; never zero, never guessed)."""

    target: str
    lang: str
    api: str
    phase: str
    source: Source
    tokens: NonNegativeFloat  # output tokens produced in the intervals energy covers
    requests: NonNegativeInt  # requests of the phase that produced any of them
    energy_j: NonNegativeFloat | None = None
    gpu_s: NonNegativeFloat | None = None  # GPU-seconds attributed (intervals x GPUs)
    j_per_token: NonNegativeFloat | None = None
    j_per_request: NonNegativeFloat | None = None
    usd: NonNegativeFloat | None = None  # None: no price given
    usd_per_mtok: NonNegativeFloat | None = None
    why: str | None = None


class EnergyBlock(Part):
    """One sampling interval's share for one (target, lang, api, phase): what `compare` resamples."""

    start: float  # unix seconds
    end: float
    target: str
    lang: str
    api: str
    phase: str
    energy_j: NonNegativeFloat
    gpu_s: NonNegativeFloat
    tokens: NonNegativeFloat


class Energy(Part):
    """Where the run's energy came from and how it was shared out (the `cost` rows)."""

    source: Source
    origin: str = ""  # e.g. a Prometheus URL and selector, or an exposition URL
    why: str | None = None  # absent: why; otherwise what the figures rest on, if anything is missing
    gpus: tuple[str, ...] = ()  # the GPUs' UUIDs whose counters were read
    method: str | None = None  # counter (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION) | power (power samples integrated)
    samples: NonNegativeInt = 0
    interval_s: NonNegativeFloat | None = None  # the median time between samples
    covered: tuple[float, float] | None = None  # unix seconds the samples span (within the run)
    energy_j: NonNegativeFloat | None = None  # all GPUs over `covered`
    unattributed_j: NonNegativeFloat | None = None  # of that, intervals in which no token was produced (idle)
    gpu_s: NonNegativeFloat | None = None
    price_per_gpu_hour: NonNegativeFloat | None = None
    price_per_kwh: NonNegativeFloat | None = None
    blocks: list[EnergyBlock] = []

    def usd(self, gpu_s: float, joules: float) -> float | None:
        """What GPU-seconds and joules cost at this run's prices (None: it gave none)."""
        return usd(gpu_s, joules, self.price_per_gpu_hour, self.price_per_kwh)


class Run(Part):
    """The whole of run.json."""

    schema_version: int = SCHEMA_VERSION
    harness_version: str = __version__
    run_id: str
    start: Time  # RFC 3339
    end: Time
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
    fault_hosts: list[FaultHost] = []
    outcomes: list[OutcomeCount] = []
    canaries: list[CanaryCount] = []  # per (target, lang, api, phase), with --canary-rate
    endings: list[Ending] = []  # per (target, lang, api, phase) where a request named its replica or KV way, ...
    sessions: list[SessionCount] = []  # per (target, lang, api), with --sessions
    slo: list[SloResult] = []
    requests: RequestsFile = RequestsFile()
    summaries: list[Summary] = []
    replay: Replay | None = None  # a replay's side: one of its results directories
    guard: list[GuardTrip] = []  # the live guard's trips (--guard)
    recovery: list[Recovery] = []  # per fault window x (target, lang, api) x SLO: detection and recovery
    cost: list[Cost] = []  # per (target, lang, api, phase): J/token and $/Mtok (--energy-from)
    energy: Energy | None = None  # where the cost's energy came from (None: not asked for)

    @model_validator(mode="after")
    def _no_duplicates(self) -> Run:
        _unique((tuple(s.key) for s in self.summaries), "summaries: a second summary of")
        _unique(((o.target, o.lang, o.api, o.phase, o.outcome) for o in self.outcomes), "outcomes: a second count of")
        _unique(((r.target, r.lang, r.api) for r in self.slo), "slo: a second row of")
        _unique(((c.target, c.lang, c.api, c.phase) for c in self.cost), "cost: a second row of")
        _unique(((e.target, e.lang, e.api, e.phase) for e in self.endings), "endings: a second row of")
        _unique(((s.target, s.lang, s.api) for s in self.sessions), "sessions: a second row of")
        return self

    def issued_and_failed(self, lang: str, phase: str | None = None) -> tuple[int, int] | None:
        """Requests of `lang` issued and failed, in `phase` (None: every phase but warmup), by the one
        definition compare uses: a request the end of the test cancelled is not issued (nor failed).
        None where that cannot be told: a run written before outcomes said which cancellations were
        the end of the test, asked for one phase that has cancellations."""
        rows = [o for o in self.outcomes if o.lang == lang and (o.phase == phase if phase else o.phase != "warmup")]
        cancelled = [o for o in rows if o.outcome == "cancelled"]
        if all(o.at_stop is not None for o in cancelled):
            stop = sum(o.at_stop or 0 for o in cancelled)
        elif phase is None:  # older run.json: its SLO rows count them over the run
            stop = min(sum(o.count for o in cancelled), sum(r.cancelled_at_stop for r in self.slo if r.lang == lang))
        else:
            return None
        total, ok = sum(o.count for o in rows), sum(o.count for o in rows if o.outcome == "ok")
        return total - stop, total - ok - stop

    def summary(self, key: Key) -> Summary | None:
        return next((s for s in self.summaries if s.key == key), None)

    def iter_summaries(self, **match: str) -> Iterator[Summary]:
        """Summaries whose key fields equal `match`, e.g. `metric="ttft", lang="de"`."""
        return (s for s in self.summaries if all(getattr(s, f) == v for f, v in match.items()))
