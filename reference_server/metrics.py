"""Server metrics under vLLM's names, types and buckets (label `model_name`)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from llmchaos.metrics import ITL_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS, buckets_1_2_5
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence


class EngineMetrics:
    def __init__(self, model_name: str, max_model_len: int, scheduler: Scheduler) -> None:
        self.registry = CollectorRegistry()
        self.model_name = model_name
        r, labels = self.registry, ["model_name"]

        def hist(name: str, doc: str, buckets: list[float]) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(model_name)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=r).labels(model_name)

        self.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Inter-token latency.", ITL_BUCKETS)
        self.tpot = hist(
            "vllm:request_time_per_output_token_seconds", "Per-request mean time per output token.", ITL_BUCKETS
        )
        self.e2e = hist("vllm:e2e_request_latency_seconds", "End-to-end request latency.", REQUEST_LATENCY_BUCKETS)
        self.queue = hist(
            "vllm:request_queue_time_seconds", "Time waiting before first scheduled.", REQUEST_LATENCY_BUCKETS
        )
        self.prefill = hist("vllm:request_prefill_time_seconds", "Time in prefill.", REQUEST_LATENCY_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds", "Time in decode.", REQUEST_LATENCY_BUCKETS)
        self.prompt_len = hist("vllm:request_prompt_tokens", "Prompt tokens per request.", buckets_1_2_5(max_model_len))
        self.gen_len = hist(
            "vllm:request_generation_tokens", "Generated tokens per request.", buckets_1_2_5(max_model_len)
        )
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Generation tokens processed.")
        self.success = Counter(
            "vllm:request_success", "Finished requests by reason.", ["model_name", "finished_reason"], registry=r
        )
        r.register(_EngineState(model_name, scheduler))

    def on_token(self, seq: Sequence, now: float) -> None:
        if seq.last_token_time is None:
            self.ttft.observe(now - seq.arrival)
        else:
            self.itl.observe(now - seq.last_token_time)

    def on_finish(self, seq: Sequence, now: float) -> None:
        """Account a request that ended (aborted ones too, as vLLM does)."""
        n = len(seq.output_token_ids)
        self.e2e.observe(now - seq.arrival)
        self.prompt_len.observe(seq.num_prompt_tokens)
        self.gen_len.observe(n)
        self.prompt_tokens.inc(seq.num_prompt_tokens)
        self.success.labels(self.model_name, seq.finish_reason or "abort").inc()
        if seq.first_scheduled is not None:
            self.queue.observe(seq.first_scheduled - seq.arrival)
        if seq.first_token_time is not None and seq.first_scheduled is not None:
            self.prefill.observe(seq.first_token_time - seq.first_scheduled)
            self.decode.observe(now - seq.first_token_time)
            if n > 1:
                self.tpot.observe((now - seq.first_token_time) / (n - 1))


class _EngineState:
    """Gauges read from the scheduler at scrape time."""

    def __init__(self, model_name: str, scheduler: Scheduler) -> None:
        self.model_name, self.s = model_name, scheduler

    def collect(self) -> Iterator[Metric]:
        s, m = self.s, [self.model_name]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=["model_name"])
            g.add_metric(m, value)
            return g

        yield gauge("vllm:num_requests_running", "Requests in the running batch.", len(s.running))
        yield gauge("vllm:num_requests_waiting", "Requests waiting.", len(s.waiting))
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage (1 = full).", s.blocks.usage)
        yield _counter("vllm:num_preemptions", "Preemptions by recompute.", m, s.num_preemptions)
        yield _counter(
            "vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", m, s.blocks.prefix_queries
        )
        yield _counter("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache.", m, s.blocks.prefix_hits)
        waiting = GaugeMetricFamily(
            "llmchaos_server_queue_length",
            "Waiting requests per language and queue.",
            labels=["model_name", "lang", "queue"],
        )
        for (lang, queue), n in _tally(s).items():
            waiting.add_metric([self.model_name, lang, queue], n)
        yield waiting


def _tally(s: Scheduler) -> Tally:
    counts: Tally = Tally((seq.lang, "waiting") for seq in s.waiting)
    counts.update((seq.lang, "running") for seq in s.running)
    return counts


def _counter(name: str, doc: str, labels: list[str], value: float) -> Metric:
    c = CounterMetricFamily(name, doc, labels=["model_name"])
    c.add_metric(labels, value)
    return c
