"""The server dashboard, on vLLM's metric names and dcgm-exporter's: the same panels read our
reference server and a real vLLM with dcgm-exporter beside it."""

from __future__ import annotations

from grafanalib import core as g

from dashboards.grafana import panels as p

MODEL = p.selector(["model_name"])
GPU = p.selector(["Hostname"])
SERIES = "vllm:num_requests_running"


def variables() -> list[g.Template]:
    return [
        p.datasource_variable(),
        p.label_variable("model_name", SERIES),
        p.label_variable("Hostname", "DCGM_FI_DEV_SM_CLOCK"),
    ]


def scheduler() -> list[g.Panel]:
    hits, queries = (p.rate(f"vllm:prefix_cache_{n}_total", MODEL, "model_name") for n in ("hits", "queries"))
    return [
        p.timeseries(
            "Requests running and waiting",
            [
                (f"sum by (model_name) (vllm:num_requests_running{MODEL})", "{{model_name}} running"),
                (f"sum by (model_name) (vllm:num_requests_waiting{MODEL})", "{{model_name}} waiting"),
            ],
            "short",
        ),
        p.timeseries(
            "KV-cache usage",
            [(f"max by (model_name) (vllm:kv_cache_usage_perc{MODEL})", "{{model_name}}")],
            "percentunit",
        ),
        p.timeseries(
            "Preemptions/s", [(p.rate("vllm:num_preemptions_total", MODEL, "model_name"), "{{model_name}}")], "short"
        ),
        p.timeseries(
            "Prefix-cache hit rate",
            [(p.ratio(hits, queries, "model_name"), "{{model_name}}")],
            "percentunit",
            "Prompt tokens found in the prefix cache over those looked up.",
        ),
        p.timeseries(
            "Tokens/s",
            [
                (p.rate("vllm:prompt_tokens_total", MODEL, "model_name"), "{{model_name}} prompt"),
                (p.rate("vllm:generation_tokens_total", MODEL, "model_name"), "{{model_name}} generation"),
            ],
            "short",
        ),
    ]


def latency() -> list[g.Panel]:
    return [
        p.percentiles(title, metric, MODEL, "model_name")
        for title, metric in (
            ("Server TTFT", "vllm:time_to_first_token_seconds"),
            ("Server ITL", "vllm:inter_token_latency_seconds"),
            ("Server E2E", "vllm:e2e_request_latency_seconds"),
            ("Queue time", "vllm:request_queue_time_seconds"),
        )
    ]


def cluster() -> list[g.Panel]:
    """The reference server as a cluster (`serve --replicas N`, `--disaggregate P:D`): its router's
    requests and replicas, the KV transfers (empty for one engine, or a real vLLM)."""
    return [
        p.timeseries(
            "Router requests/s by replica",
            [(p.rate("llmchaos_router_requests_total", "", "replica, result"), "{{replica}} {{result}}")],
            "reqps",
            "routed: its head came back; retried: no head, sent on to another; failed: nowhere left, or cut.",
        ),
        p.timeseries("Replicas up", [("sum by (replica) (llmchaos_router_replica_up)", "{{replica}}")], "short"),
        p.timeseries(
            "KV transfers/s by how they ended",
            [(p.rate("llmchaos_kv_transfers_total", "", "result"), "{{result}}")],
            "reqps",
            "Decode's pulls of the prompt's KV cache: pulled, recomputed, failed (fail-fast), timed_out (hang).",
        ),
        p.timeseries(
            "KV bytes/s",
            [(p.rate("llmchaos_kv_transfer_bytes_total", "", "role"), "{{role}}")],
            "Bps",
            "Sent by prefill, received by decode (--kv-bytes-scale of the full size).",
        ),
        p.percentiles("KV transfer time", "llmchaos_kv_transfer_seconds", "", "role"),
    ]


def gpu() -> list[g.Panel]:
    """dcgm-exporter's gauges per GPU (absent from a server without a GPU: the panels stay empty)."""
    gauges = (
        ("SM clock", "DCGM_FI_DEV_SM_CLOCK", "MHz"),
        ("GPU utilization", "DCGM_FI_DEV_GPU_UTIL", "percent"),
        ("Power", "DCGM_FI_DEV_POWER_USAGE", "watt"),
        ("Temperature", "DCGM_FI_DEV_GPU_TEMP", "celsius"),
        ("Framebuffer used", "DCGM_FI_DEV_FB_USED", "decmbytes"),
        ("Memory copy utilization", "DCGM_FI_DEV_MEM_COPY_UTIL", "percent"),
    )
    return [p.gpu_gauge(title, metric, GPU, unit) for title, metric, unit in gauges]


def build() -> g.Dashboard:
    return p.dashboard(
        "llmchaos-server",
        "llmchaos: server (vLLM and DCGM)",
        "vLLM's scheduler, KV cache and latency metrics, and dcgm-exporter's GPU gauges.",
        variables(),
        [p.fault_annotation("")],
        p.layout(
            [
                ("Scheduler and KV cache", scheduler()),
                ("Server latency", latency()),
                ("Cluster: router and KV transfers", cluster()),
                ("GPU", gpu()),
            ]
        ),
    )
