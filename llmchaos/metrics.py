"""Client-side metric names (the Prometheus contract in DESIGN.md) and their buckets."""

from __future__ import annotations

from dataclasses import dataclass

# vLLM's own bucket edges (vllm/v1/metrics/loggers.py), shared with the reference server; kept as
# tables, which read best as tables.
# fmt: off
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0]
REQUEST_LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
# fmt: on


def buckets_1_2_5(maximum: int) -> list[float]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to `maximum`."""
    out: list[float] = []
    exp = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exp
            if v > maximum:
                return out
            out.append(float(v))
        exp += 1


LABELS = ("target", "lang", "api", "phase")


@dataclass(frozen=True)
class Metric:
    key: str  # short name used in results (run.json, histograms/)
    prom: str  # Prometheus name
    unit: str  # "seconds" (recorded in microseconds) or "tokens"
    buckets: tuple[float, ...]
    help: str
    labels: tuple[tuple[str, str], ...] = ()  # its own labels beyond LABELS (a turn bucket's)

    @property
    def scale(self) -> int:
        """Recorded integer units per reported unit."""
        return 1_000_000 if self.unit == "seconds" else 1


def _edges(*groups: list[float]) -> tuple[float, ...]:
    return tuple(sorted({float(x) for g in groups for x in g}))


def slo_edges() -> list[float]:
    """Every SLO threshold in the registry, in seconds, so SLO lines fall on bucket edges."""
    from llmchaos import languages

    return [v / 1000.0 for lang in languages.registry().values() for k, v in lang.slo.items() if k.endswith("_ms")]


TURN_BUCKETS = ("1", "2-3", "4-7", "8+")  # a conversation's turns (--sessions), as the histograms group them
PER_TURN = ("ttft", "itl")  # the metrics kept per turn bucket too


def turn_bucket(turn: int) -> str:
    """The bucket of turn `turn` (1: the first)."""
    return "1" if turn == 1 else "2-3" if turn <= 3 else "4-7" if turn <= 7 else "8+"


def per_turn(metric: str, turn: int) -> str:
    """The key of `metric` for the turns of `turn`'s bucket, e.g. ttft_turn_2-3."""
    return f"{metric}_turn_{turn_bucket(turn)}"


def _per_turn(m: Metric) -> list[Metric]:
    name = m.prom.removeprefix("llmchaos_")
    return [
        Metric(f"{m.key}_turn_{b}", f"llmchaos_turn_{name}", m.unit, m.buckets, f"{m.help} By turn.", (("turn", b),))
        for b in TURN_BUCKETS
    ]


def _metrics() -> dict[str, Metric]:
    base = _base_metrics()
    return base | {t.key: t for key in PER_TURN for t in _per_turn(base[key])}


def _base_metrics() -> dict[str, Metric]:
    slo = slo_edges()
    latency = _edges(TTFT_BUCKETS, REQUEST_LATENCY_BUCKETS, slo)
    token = _edges(ITL_BUCKETS, [0.001, 0.0025, 0.005, 0.0075], slo)
    return {
        m.key: m
        for m in (
            Metric("ttft", "llmchaos_ttft_seconds", "seconds", latency, "Time to the first token (thinking too)."),
            Metric(
                "ttfa",
                "llmchaos_ttfa_seconds",
                "seconds",
                latency,
                "Time to the first answer token (after a reasoning model's thinking).",
            ),
            Metric("itl", "llmchaos_itl_seconds", "seconds", token, "Inter-token latency (gaps spread per token)."),
            Metric(
                "inter_chunk",
                "llmchaos_inter_chunk_seconds",
                "seconds",
                token,
                "Gap between consecutive content events.",
            ),
            Metric("tpot", "llmchaos_tpot_seconds", "seconds", token, "(E2E - TTFT) / (output tokens - 1)."),
            Metric("e2e", "llmchaos_e2e_seconds", "seconds", latency, "Request start to stream terminator."),
            Metric(
                "step",
                "llmchaos_step_seconds",
                "seconds",
                latency,
                "Sessions: a turn from its user message to its answer in text, tool round trips included.",
            ),
            Metric(
                "output_tokens",
                "llmchaos_output_tokens",
                "tokens",
                _edges(buckets_1_2_5(100_000)),
                "Output tokens per request (thinking included).",
            ),
            Metric(
                "reasoning_tokens",
                "llmchaos_reasoning_tokens",
                "tokens",
                _edges(buckets_1_2_5(100_000)),
                "Thinking tokens per request that thought (within its output tokens).",
            ),
            Metric(
                "schedule_lag",
                "llmchaos_schedule_lag_seconds",
                "seconds",
                latency,
                "Open loop: actual send minus intended start.",
            ),
            Metric(
                "prepare",
                "llmchaos_prepare_seconds",
                "seconds",
                latency,
                "Open loop: building a request's call ahead of its time (a replayed prompt), apart from its lag.",
            ),
            Metric(
                "send",
                "llmchaos_send_seconds",
                "seconds",
                latency,
                "Open loop: from a request's send to its last byte written to the socket (connecting included).",
            ),
            Metric(
                "ttft_sent",
                "llmchaos_ttft_from_send_seconds",
                "seconds",
                latency,
                "Open loop: TTFT from the actual send (not corrected for coordinated omission).",
            ),
            Metric(
                "e2e_sent",
                "llmchaos_e2e_from_send_seconds",
                "seconds",
                latency,
                "Open loop: E2E from the actual send (not corrected for coordinated omission).",
            ),
        )
    }


METRICS = _metrics()
REQUESTS_TOTAL = "llmchaos_requests_total"  # counter, plus label outcome
SLO_ISSUED_TOTAL = "llmchaos_slo_issued_total"  # requests issued (failures included: misses)
SLO_MET_TOTAL = "llmchaos_slo_met_total"  # requests that met their language's SLO: goodput
FAULT_ACTIVE = "llmchaos_fault_active"  # gauge, labels fault, kind, target
# at the run's end, per fault window x (target, lang, api) x SLO key judged (llmchaos/recovery.py); labels
# fault, target, lang, api, slo: from its start to the first window over the SLO (absent: none was), from its
# revert to back within it (absent: never within the run), and whether it was back (1) or not (0)
FAULT_DETECT = "llmchaos_fault_detect_seconds"
FAULT_RECOVER = "llmchaos_fault_recover_seconds"
FAULT_RECOVERED = "llmchaos_fault_recovered"
JOULES_PER_TOKEN = "llmchaos_energy_per_token_joules"  # at the run's end, labels LABELS + source (--energy-from)
USD_PER_MTOK = "llmchaos_cost_per_mtok_usd"
GENERATOR_CPU = "llmchaos_generator_cpu_ratio"  # the generator's own CPU, of one core, last sample; label process
GENERATOR_LOOP_LAG = "llmchaos_generator_loop_lag_seconds"  # how late its event loop ran; label process
RUN_ID = "run_id"  # on every series, the Pushgateway's grouping key too: a live scrape can select a run
OUTCOMES = (
    "ok",
    "rate_limited",
    "truncated",
    "stalled",
    "malformed",
    "ttft_timeout",
    "timeout",
    "stranded",  # no byte for the stall limit before any content, then no answer (loadtests/dataplane/response.py)
    "connect_error",
    "cancelled",
    "wrong",  # 200 and whole, but a canary's answer that failed its check (loadtests/canaries.py)
)  # plus http_<code>
