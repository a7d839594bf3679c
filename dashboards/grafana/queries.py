"""Every query of a dashboard's JSON: each panel's targets, each annotation, each template variable."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

VARIABLE_QUERY = "label_values("  # Grafana's own function in a variable's query, not PromQL


@dataclass(frozen=True)
class Query:
    dashboard: str
    where: str  # "panel 'TTFT by language' A", "annotation 'Fault windows'", "variable lang"
    expr: str

    @property
    def is_variable(self) -> bool:
        return self.where.startswith("variable ")


def queries(dashboard: dict[str, Any]) -> Iterator[Query]:
    title = dashboard["title"]
    for panel in _panels(dashboard["panels"]):
        for t in panel.get("targets", []):
            yield Query(title, f"panel {panel['title']!r} {t['refId']}", t["expr"])
    for a in dashboard["annotations"]["list"]:
        yield Query(title, f"annotation {a['name']!r}", a["expr"])
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            yield Query(title, f"variable {v['name']}", v["query"])


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))
