"""Without Grafana: a link per dashboard panel to Prometheus' own graph page with that panel's query
(variables read as "all": `.*`; `$__rate_interval` as four scrapes)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

VARIABLE_MATCH = re.compile(r'(\w+)=~?"\$\w+"')  # label="$var" or label=~"$var"


def promql(expr: str, rate_interval: str) -> str:
    """A panel's query with its variables read as every value."""
    return VARIABLE_MATCH.sub(r'\1=~".*"', expr).replace("$__rate_interval", rate_interval)


def panel_links(dashboards: Path, prometheus_url: str, rate_interval: str) -> Iterator[tuple[str, str, str]]:
    """(dashboard, panel, link) for every query of every panel of the generated dashboards."""
    for path in sorted(dashboards.glob("*.json")):
        dash = json.loads(path.read_text())
        for panel in dash["panels"]:
            for t in panel.get("targets", []):
                query = urlencode({"g0.expr": promql(t["expr"], rate_interval), "g0.tab": "0", "g0.range_input": "30m"})
                yield dash["title"], f"{panel['title']} {t['refId']}", f"{prometheus_url}/graph?{query}"


def write(out: Path, dashboards: Path, prometheus_url: str, rate_interval: str) -> int:
    """The links as a Markdown list under each dashboard's title; how many."""
    lines, last, n = [], None, 0
    for dash, panel, link in panel_links(dashboards, prometheus_url, rate_interval):
        if dash != last:
            lines += ["", f"## {dash}", ""]
            last = dash
        lines.append(f"- [{panel}]({link})")
        n += 1
    out.write_text("# Panels in Prometheus (no Grafana here)\n" + "\n".join(lines) + "\n")
    return n
