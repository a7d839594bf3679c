"""Server metrics under vLLM's names, types, buckets and labels (`model_name`, `engine`).

The families of vLLM 0.32's PrometheusStatLogger (vllm/v1/metrics/loggers.py) whose values this
engine really knows; those of features it has not (speculative decoding, KV connectors and the
external prefix cache, multimodal caches, LoRA, NaN-logit checks, the opt-in KV-block residency
histograms, CacheConfig's info gauge) are left out rather than faked.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections import abc
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from llmchaos.metrics import ITL_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS, buckets_1_2_5
from reference_server.batch import Batch
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence

ENGINE = "0"  # vLLM's engine index: one engine core here
LABELS = ["model_name", "engine"]
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")  # vLLM's FinishReason, each a series from the start
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
ITERATION_TOKEN_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


class EngineMetrics:
    def __init__(self, model_name: str, max_model_len: int, scheduler: Scheduler, executor: object = None) -> None:
        self.registry = CollectorRegistry()
        r, values = self.registry, [model_name, ENGINE]

        def hist(name: str, doc: str, buckets: abc.Sequence[float]) -> Histogram:
            return Histogram(name, doc, LABELS, buckets=buckets, registry=r).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, LABELS, registry=r).labels(*values)

        def per(name: str, doc: str, label: str, keys: tuple[str, ...]) -> dict[str, Counter]:
            family = Counter(name, doc, [*LABELS, label], registry=r)
            return {k: family.labels(*values, k) for k in keys}

        tokens = buckets_1_2_5(max_model_len)
        self.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Inter-token latency.", ITL_BUCKETS)
        self.tpot = hist(
            "vllm:request_time_per_output_token_seconds", "Per-request mean time per output token.", ITL_BUCKETS
        )
        self.e2e = hist("vllm:e2e_request_latency_seconds", "End-to-end request latency.", REQUEST_LATENCY_BUCKETS)
        self.queue = hist(
            "vllm:request_queue_time_seconds", "Time waiting before first scheduled.", REQUEST_LATENCY_BUCKETS
        )
        self.inference = hist(
            "vllm:request_inference_time_seconds", "Time from first scheduled to finished.", REQUEST_LATENCY_BUCKETS
        )
        self.prefill = hist("vllm:request_prefill_time_seconds", "Time in prefill.", REQUEST_LATENCY_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds", "Time in decode.", REQUEST_LATENCY_BUCKETS)
        self.prompt_len = hist("vllm:request_prompt_tokens", "Prompt tokens per request.", tokens)
        self.gen_len = hist("vllm:request_generation_tokens", "Generated tokens per request.", tokens)
        self.kv_computed = hist(
            "vllm:request_prefill_kv_computed_tokens", "Prompt tokens computed in prefill (not cached).", tokens
        )
        self.max_gen = hist(
            "vllm:request_max_num_generation_tokens", "Maximum generation tokens a request asked for.", tokens
        )
        self.max_tokens = hist("vllm:request_params_max_tokens", "The max_tokens request parameter.", tokens)
        self.n = hist("vllm:request_params_n", "The n request parameter.", [1, 2, 5, 10, 20])
        self.iteration = hist(
            "vllm:iteration_tokens_total",
            "Tokens per engine step (prompt tokens computed plus tokens generated).",
            ITERATION_TOKEN_BUCKETS,
        )
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.")
        self.prompt_cached = counter("vllm:prompt_tokens_cached", "Prompt tokens found in the prefix cache.")
        self.prompt_by_source = per(
            "vllm:prompt_tokens_by_source", "Prompt tokens by source.", "source", PROMPT_SOURCES
        )
        self.generation_tokens = counter("vllm:generation_tokens", "Generation tokens processed.")
        self.success = per("vllm:request_success", "Finished requests by reason.", "finished_reason", FINISH_REASONS)
        r.register(_EngineState(values, scheduler))
        if hasattr(executor, "late_s"):
            r.register(_Late(values, executor))

    def on_token(self, seq: Sequence, now: float) -> None:
        if seq.last_token_time is None:
            self.ttft.observe(now - seq.arrival)
        else:
            self.itl.observe(now - seq.last_token_time)

    def on_step(self, batch: Batch, generated: int) -> None:
        """One engine step: the prompt tokens it computed and the tokens it generated."""
        self.generation_tokens.inc(generated)
        self.iteration.observe(batch.num_prefill_tokens + generated)

    def on_finish(self, seq: Sequence, now: float) -> None:
        """Account a request that ended (aborted ones too, as vLLM does)."""
        n, prompt = len(seq.output_token_ids), seq.num_prompt_tokens
        cached = min(seq.num_cached_tokens, prompt)
        self.e2e.observe(now - seq.arrival)
        self.prompt_len.observe(prompt)
        self.gen_len.observe(n)
        self.max_gen.observe(seq.params.max_tokens)
        self.max_tokens.observe(seq.params.max_tokens)
        self.n.observe(1)
        self.prompt_tokens.inc(prompt)
        self.prompt_cached.inc(cached)
        external = max(0, min(seq.num_external_tokens, prompt) - cached)
        self.prompt_by_source["local_cache_hit"].inc(cached)
        self.prompt_by_source["external_kv_transfer"].inc(external)
        self.prompt_by_source["local_compute"].inc(prompt - cached - external)
        self.success[seq.finish_reason or "abort"].inc()
        if seq.first_scheduled is not None:
            self.queue.observe(seq.first_scheduled - seq.arrival)
            self.inference.observe(now - seq.first_scheduled)
            self.kv_computed.observe(prompt - cached - external)
        if seq.first_token_time is not None and seq.first_scheduled is not None:
            self.prefill.observe(seq.first_token_time - seq.first_scheduled)
            self.decode.observe(now - seq.first_token_time)
            if n > 1:
                self.tpot.observe((now - seq.first_token_time) / (n - 1))


class _EngineState:
    """Gauges read from the scheduler at scrape time."""

    def __init__(self, values: list[str], scheduler: Scheduler) -> None:
        self.values, self.s = values, scheduler

    def collect(self) -> Iterator[Metric]:
        s, v = self.s, self.values

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=LABELS)
            g.add_metric(v, value)
            return g

        def counter(name: str, doc: str, value: float) -> Metric:
            c = CounterMetricFamily(name, doc, labels=LABELS)
            c.add_metric(v, value)
            return c

        def split(name: str, doc: str, label: str, values: Mapping[str, float]) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=[*LABELS, label])
            for key, value in values.items():
                g.add_metric([*v, key], value)
            return g

        yield gauge("vllm:num_requests_running", "Requests in the running batch.", len(s.running))
        yield gauge("vllm:num_requests_waiting", "Requests waiting.", len(s.waiting))
        # Every waiting request waits for capacity: nothing here defers one (LoRA budget, KV transfer).
        waiting = {"capacity": len(s.waiting), "deferred": 0}
        yield split("vllm:num_requests_waiting_by_reason", "Waiting requests by reason.", "reason", waiting)
        awake = {"awake": 1, "weights_offloaded": 0, "discard_all": 0}  # the engine has no sleep mode
        yield split("vllm:engine_sleep_state", "Engine sleep state.", "sleep_state", awake)
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage (1 = full).", s.blocks.usage)
        yield counter("vllm:num_preemptions", "Preemptions by recompute.", s.num_preemptions)
        queries = s.blocks.prefix_queries
        yield counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", queries)
        yield counter("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache.", s.blocks.prefix_hits)
        yield counter(
            "llmchaos_prefix_cache_resets", "POST /reset_prefix_cache calls (the cache forgotten).", s.blocks.resets
        )
        queues = GaugeMetricFamily(
            "llmchaos_server_queue_length",
            "Waiting requests per language and queue.",
            labels=["model_name", "lang", "queue"],
        )
        for (lang, queue), n in _tally(s).items():
            queues.add_metric([v[0], lang, queue], n)
        yield queues


class _Late:
    """The sim's own lateness: model time its steps lost by running later than they may catch up (a CPU
    too busy for the load); rising, the stand-in is not keeping to its profile."""

    def __init__(self, values: list[str], executor: Any) -> None:  # noqa: ANN401 - any executor with late_s
        self.values, self.executor = values, executor

    def collect(self) -> Iterator[Metric]:
        c = CounterMetricFamily(
            "llmchaos_sim_late_seconds",
            "Model time the sim's steps lost running behind (its CPU short).",
            labels=LABELS,
        )
        c.add_metric(self.values, self.executor.late_s)
        yield c


def _tally(s: Scheduler) -> Tally:
    counts: Tally = Tally((seq.lang, "waiting") for seq in s.waiting)
    counts.update((seq.lang, "running") for seq in s.running)
    return counts
