"""The A/B dashboard: the load dashboard's per-language panels for target A and target B side by
side, and B's over A's."""

from __future__ import annotations

from grafanalib import core as g

from dashboards.grafana import panels as p
from llmchaos.metrics import METRICS, REQUESTS_TOTAL, SLO_ISSUED_TOTAL, SLO_MET_TOTAL

LABELS = ("run_id", "lang", "phase")
SIDES = {"A": p.selector(LABELS, target="$target_a"), "B": p.selector(LABELS, target="$target_b")}
RUN = p.selector(["run_id"])
LATENCIES = (
    ("TTFT", METRICS["ttft"].prom),
    ("Time to first answer", METRICS["ttfa"].prom),
    ("ITL", METRICS["itl"].prom),
    ("E2E", METRICS["e2e"].prom),
)


def variables() -> list[g.Template]:
    """Runs (a replay's one, or two runs), one target per side, then languages and phases."""
    sides = [p.label_variable("target", p.SERIES, ["run_id"], multi=False, name=f"target_{s.lower()}") for s in SIDES]
    return [
        p.datasource_variable(),
        p.label_variable("run_id", p.SERIES),
        *sides,
        *(p.label_variable(label, p.SERIES, ["run_id"]) for label in ("lang", "phase")),
    ]


def latency(title: str, metric: str) -> list[g.Panel]:
    """P50 and P99 for A, for B, and B's P99 over A's."""
    ratio = p.ratio(p.quantile(0.99, metric, SIDES["B"]), p.quantile(0.99, metric, SIDES["A"]))
    return [
        *(
            p.percentiles(f"{title} — {side} ($target_{side.lower()})", metric, sel, quantiles=(0.5, 0.99))
            for side, sel in SIDES.items()
        ),
        p.timeseries(f"{title} P99, B / A", [(ratio, "{{lang}}")], "none", "Above 1: B is slower."),
    ]


def rates() -> list[g.Panel]:
    met = {s: p.rate(SLO_MET_TOTAL, sel) for s, sel in SIDES.items()}
    issued = {s: p.rate(SLO_ISSUED_TOTAL, sel) for s, sel in SIDES.items()}
    return [
        p.timeseries("Goodput, A and B", [(met[s], f"{{{{lang}}}} {s}") for s in SIDES], "reqps"),
        p.timeseries("Goodput, B / A", [(p.ratio(met["B"], met["A"]), "{{lang}}")], "none", "Below 1: B serves less."),
        p.timeseries(
            "SLO attainment, A and B", [(p.ratio(met[s], issued[s]), f"{{{{lang}}}} {s}") for s in SIDES], "percentunit"
        ),
        p.timeseries(
            "Requests by outcome, A and B",
            [(p.rate(REQUESTS_TOTAL, sel, "outcome"), f"{{{{outcome}}}} {s}") for s, sel in SIDES.items()],
            "reqps",
        ),
    ]


def build() -> g.Dashboard:
    sections = [(title, latency(title, metric)) for title, metric in LATENCIES]
    return p.dashboard(
        "llmchaos-ab",
        "llmchaos: A/B",
        "Target A and target B side by side per language, and B over A.",
        variables(),
        [p.fault_annotation(RUN)],
        p.layout([*sections, ("Goodput and SLOs", rates()), ("Faults", [p.fault_timeline(RUN)])]),
    )
