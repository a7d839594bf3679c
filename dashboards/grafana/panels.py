"""Shared builders of the generated dashboards: the datasource and label variables, selectors,
percentile and rate queries that show no NaN when idle, panels laid out on Grafana's grid, and the
fault windows as annotations."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from grafanalib import core as g

from llmchaos.metrics import FAULT_ACTIVE, REQUESTS_TOTAL

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"
QUANTILES = (0.5, 0.95, 0.99)
WIDTH, HEIGHT, COLUMNS = 12, 8, 2  # Grafana's grid is 24 wide
CLIENT_LABELS = ("run_id", "target", "lang", "phase")  # the client's label variables, in this order
ANY = ".*"
SERIES = REQUESTS_TOTAL  # present for every request of every run: the variables' source


def datasource_variable() -> g.Template:
    return g.Template(name="datasource", label="Datasource", query="prometheus", type="datasource", default="")


def label_variable(
    label: str, metric: str, after: Sequence[str] = (), multi: bool = True, name: str = ""
) -> g.Template:
    """A query variable (named `name`, else `label`) over `label`'s values on `metric`, narrowed by
    the variables before it."""
    query = f"label_values({metric}{selector(after)}, {label})"
    return g.Template(
        name=name or label,
        label=(name or label).replace("_", " "),
        query=query,
        dataSource=DATASOURCE,
        includeAll=multi,
        multi=multi,
        allValue=ANY if multi else None,
        refresh=g.REFRESH_ON_TIME_RANGE_CHANGE,
        sort=g.SORT_ALPHA_DESC if label == "run_id" else g.SORT_ALPHA_ASC,
    )


def client_variables(labels: Sequence[str] = CLIENT_LABELS) -> list[g.Template]:
    """The datasource, then each label's variable narrowed by those before it (run id first)."""
    return [datasource_variable()] + [
        label_variable(label, SERIES, labels[:i], multi=label != "run_id") for i, label in enumerate(labels)
    ]


def selector(labels: Iterable[str], **fixed: str) -> str:
    """`{a=~"$a",...,k="v"}` ('' when empty): each label matched by its variable's regex."""
    parts = [f'{label}=~"${label}"' for label in labels] + [f'{k}="{v}"' for k, v in fixed.items()]
    return "{" + ",".join(parts) + "}" if parts else ""


def defined(expr: str) -> str:
    """`expr` without its NaN points (0/0, a quantile over no requests): an idle panel is empty."""
    return f"({expr}) >= 0"


def quantile(q: float, metric: str, sel: str, by: str = "lang") -> str:
    """Grafana's percentile of a histogram over the rate interval, per `by`."""
    return defined(f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{sel}[{RATE}])))")


def rate(metric: str, sel: str, by: str = "lang") -> str:
    return f"sum by ({by}) (rate({metric}{sel}[{RATE}]))"


def ratio(numerator: str, denominator: str, on: str = "lang") -> str:
    """numerator / denominator matched on `on`, without the points where the denominator is 0."""
    return defined(f"({numerator}) / on ({on}) ({denominator})")


def target(expr: str, legend: str, ref: str) -> g.Target:
    return g.Target(expr=expr, legendFormat=legend, refId=ref, datasource=DATASOURCE)


def timeseries(title: str, targets: Sequence[tuple[str, str]], unit: str = "", description: str = "") -> g.TimeSeries:
    """A time-series panel of (expr, legend) queries."""
    return g.TimeSeries(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=[target(e, legend, chr(ord("A") + i)) for i, (e, legend) in enumerate(targets)],
        unit=unit,
        legendDisplayMode="table",
        legendPlacement="right",
        legendCalcs=["lastNotNull", "max"],
        spanNulls=False,
    )


def percentiles(
    title: str, metric: str, sel: str, by: str = "lang", quantiles: Sequence[float] = QUANTILES
) -> g.TimeSeries:
    """Percentiles (P50, P95, P99) of a seconds histogram, one line per `by` value."""
    lines = [(quantile(q, metric, sel, by), f"{{{{{by}}}}} p{round(q * 100)}") for q in quantiles]
    return timeseries(title, lines, "s")


def gpu_gauge(title: str, metric: str, sel: str, unit: str) -> g.TimeSeries:
    """One of dcgm-exporter's gauges, a line per GPU (none from a server without a GPU: the panel stays empty)."""
    return timeseries(title, [(f"max by (Hostname, gpu) ({metric}{sel})", "{{Hostname}} GPU {{gpu}}")], unit)


def fault_expr(sel: str) -> str:
    return f"max by (fault, kind) ({FAULT_ACTIVE}{sel}) > 0"


def fault_annotation(sel: str) -> dict:
    """Fault windows from `llmchaos_fault_active`: Grafana draws consecutive active points of a series
    as one shaded region on every time-series panel (plain JSON: grafanalib has no annotation type)."""
    return {
        "datasource": DATASOURCE,
        "enable": True,
        "expr": fault_expr(sel),
        "iconColor": "rgba(255, 96, 96, 0.4)",
        "name": "Fault windows",
        "step": "5s",
        "titleFormat": "{{fault}}",
        "textFormat": "{{kind}} fault active",
        "tagKeys": "fault,kind",
        "useValueForTime": False,
    }


def fault_timeline(sel: str) -> g.StateTimeline:
    """Which fault is active when, as a state timeline."""
    return g.StateTimeline(
        title="Fault windows",
        dataSource=DATASOURCE,
        targets=[target(f"max by (fault, kind) ({FAULT_ACTIVE}{sel})", "{{fault}} ({{kind}})", "A")],
        mappings=[{"type": "value", "options": {"0": {"text": "off"}, "1": {"text": "active", "color": "red"}}}],
    )


def layout(sections: Sequence[tuple[str, Sequence[g.Panel]]]) -> list[g.Panel]:
    """Rows of panels on Grafana's grid, `COLUMNS` panels abreast."""
    out: list[g.Panel] = []
    y = 0
    for title, panels in sections:
        out.append(g.RowPanel(title=title, gridPos=g.GridPos(h=1, w=24, x=0, y=y)))
        y += 1
        for i, p in enumerate(panels):
            p.gridPos = g.GridPos(h=HEIGHT, w=WIDTH, x=(i % COLUMNS) * WIDTH, y=y + (i // COLUMNS) * HEIGHT)
            out.append(p)
        y += -(-len(panels) // COLUMNS) * HEIGHT
    return out


def dashboard(
    uid: str, title: str, description: str, variables: list[g.Template], annotations: list[dict], panels: list[g.Panel]
) -> g.Dashboard:
    return g.Dashboard(
        uid=uid,
        title=title,
        description=description,
        tags=["llmchaos"],
        templating=g.Templating(list=variables),
        annotations=g.Annotations(list=annotations),
        panels=panels,
        time=g.Time("now-30m", "now"),
        refresh="10s",
        timezone="browser",
    ).auto_panel_ids()
