"""The load dashboard: per-language latency percentiles, outcomes, goodput and SLO attainment, output
tokens/s, the GPUs' energy per output token and power, and the generator's own health, with the fault
windows shaded."""

from __future__ import annotations

from grafanalib import core as g

from dashboards.grafana import panels as p
from llmchaos.metrics import (
    FAULT_RECOVER,
    GENERATOR_CPU,
    GENERATOR_LOOP_LAG,
    JOULES_PER_TOKEN,
    METRICS,
    REQUESTS_TOTAL,
    SLO_ISSUED_TOTAL,
    SLO_MET_TOTAL,
    USD_PER_MTOK,
)

SEL = p.selector(p.CLIENT_LABELS)
RUN = p.selector(["run_id"])
GPU = p.selector(["Hostname"])  # dcgm-exporter's (or the reference server's) GPUs, by host
ENERGY, POWER = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_POWER_USAGE"  # mJ since boot (a counter), W


def latency() -> list[g.Panel]:
    return [
        p.percentiles("TTFT by language", METRICS["ttft"].prom, SEL),
        p.percentiles("Time to first answer by language", METRICS["ttfa"].prom, SEL),
        p.percentiles("ITL by language", METRICS["itl"].prom, SEL),
        p.percentiles("E2E by language", METRICS["e2e"].prom, SEL),
        p.percentiles("Inter-chunk gap by language", METRICS["inter_chunk"].prom, SEL),
    ]


def throughput() -> list[g.Panel]:
    issued, met = p.rate(SLO_ISSUED_TOTAL, SEL), p.rate(SLO_MET_TOTAL, SEL)
    return [
        p.timeseries("Requests by outcome", [(p.rate(REQUESTS_TOTAL, SEL, "outcome"), "{{outcome}}")], "reqps"),
        p.timeseries(
            "Goodput by language",
            [(met, "{{lang}}")],
            "reqps",
            "Requests per second that met their language's SLO (failures never do).",
        ),
        p.timeseries(
            "SLO attainment by language",
            [(p.ratio(met, issued), "{{lang}}")],
            "percentunit",
            "Requests that met the SLO over requests issued, failures counted as misses.",
        ),
        p.timeseries(
            "Output tokens/s by language", [(p.rate(METRICS["output_tokens"].prom + "_sum", SEL), "{{lang}}")], "short"
        ),
        p.timeseries(
            "Reasoning tokens/s by language",
            [(p.rate(METRICS["reasoning_tokens"].prom + "_sum", SEL), "{{lang}}")],
            "short",
            "Thinking tokens of reasoning models, within the output tokens (empty for a model that does not think).",
        ),
        p.fault_timeline(RUN),
        p.timeseries(
            "Recovery after each fault window",
            [(f"max by (fault, lang, slo) ({FAULT_RECOVER}{RUN})", "{{fault}} {{lang}} {{slo}}")],
            "s",
            "From a fault's revert to back within the language's SLO for the rule's windows in a row, set when "
            "the run ends; one never back within the run has no value here and llmchaos_fault_recovered 0.",
        ),
    ]


def energy() -> list[g.Panel]:
    """The GPUs' energy over the output tokens of the run and target (every language and phase: shared
    out by tokens, each language's J/token in an interval is this one), their power, and run.json's cost
    per language and phase as the run exported it at its end."""
    joules = f"sum(rate({ENERGY}{GPU}[{p.RATE}])) / 1000"
    tokens = f"sum(rate({METRICS['output_tokens'].prom}_sum{p.selector(['run_id', 'target'])}[{p.RATE}])) > 0"
    at_end = "Set when the run ends, from run.json's cost (--energy-from); an absent figure has no series."
    return [
        p.timeseries(
            "Energy per output token",
            [(f"({joules}) / on () ({tokens})", "J/token")],
            "joule",
            "The selected GPUs' energy (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ) per second over the output "
            "tokens per second of the run and target, every language together. Empty while no token is made, "
            "and where no GPU exports the counter.",
        ),
        p.gpu_gauge("GPU power", POWER, GPU, "watt"),
        p.timeseries(
            "J/token by language and phase",
            [(f"max by (lang, phase) ({JOULES_PER_TOKEN}{SEL})", "{{lang}} {{phase}}")],
            "joule",
            at_end,
        ),
        p.timeseries(
            "$/Mtok by language and phase",
            [(f"max by (lang, phase) ({USD_PER_MTOK}{SEL})", "{{lang}} {{phase}}")],
            "currencyUSD",
            at_end + " Priced with --price-per-gpu-hour and --price-per-kwh.",
        ),
    ]


def generator() -> list[g.Panel]:
    return [
        p.timeseries(
            "Schedule lag (open loop)",
            [(p.quantile(0.99, METRICS["schedule_lag"].prom, SEL), "{{lang}} p99")],
            "s",
            "Actual send minus intended start: a late generator omits load.",
        ),
        p.timeseries("Generator CPU", [(f"max by (process) ({GENERATOR_CPU}{RUN})", "{{process}}")], "percentunit"),
        p.percentiles("Generator event-loop lag", GENERATOR_LOOP_LAG, RUN, "process", (0.5, 0.99)),
    ]


def build() -> g.Dashboard:
    return p.dashboard(
        "llmchaos-load",
        "llmchaos: load",
        "Per-language latency, outcomes, goodput and the generator's health of one run, fault windows shaded.",
        [*p.client_variables(), p.label_variable("Hostname", POWER)],
        [p.fault_annotation(RUN)],
        p.layout(
            [
                ("Latency", latency()),
                ("Throughput and SLOs", throughput()),
                ("Energy", energy()),
                ("Load generator", generator()),
            ]
        ),
    )
