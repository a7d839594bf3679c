"""Render the dashboards to JSON, refuse a query on a metric no code defines, write them or check that
the committed files are up to date."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grafanalib import core as g
from grafanalib._gen import DashboardEncoder

from dashboards.grafana import ab, inference, load
from dashboards.grafana.names import defined, unknown
from dashboards.grafana.queries import queries

OUT = Path(__file__).resolve().parent / "json"
DASHBOARDS: dict[str, Callable[[], g.Dashboard]] = {
    "llmchaos-load.json": load.build,
    "llmchaos-ab.json": ab.build,
    "llmchaos-server.json": inference.build,
}


class BuildError(Exception):
    """A dashboard queries a metric that no code defines, or the committed JSON is stale."""


def render(dashboard: g.Dashboard) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(dashboard.to_json_data(), cls=DashboardEncoder))
    return data


def text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def check_names(data: dict[str, Any], known: frozenset[str]) -> list[str]:
    """One line per query reading an `llmchaos_*`, `vllm:*` or `DCGM_*` metric that `known` lacks."""
    return [
        f"{q.dashboard}: {q.where}: no code defines {', '.join(bad)}: {q.expr}"
        for q in queries(data)
        if (bad := unknown(q.expr, known))
    ]


def rendered(
    builders: dict[str, Callable[[], g.Dashboard]] = DASHBOARDS, known: frozenset[str] | None = None
) -> dict[str, str]:
    """File name -> JSON text of every dashboard; BuildError listing every unknown metric."""
    known = defined() if known is None else known
    out, problems = {}, []
    for name, build in builders.items():
        data = render(build())
        problems += check_names(data, known)
        out[name] = text(data)
    if problems:
        raise BuildError("\n".join(problems))
    return out


def write(out_dir: Path, files: dict[str, str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, body in files.items():
        path = out_dir / name
        path.write_text(body, encoding="utf-8")
        paths.append(path)
    return paths


def stale(out_dir: Path, files: dict[str, str]) -> list[str]:
    """The files under `out_dir` that differ from what the code builds now (or are missing)."""
    return [
        str(out_dir / name)
        for name, body in files.items()
        if not (out_dir / name).is_file() or (out_dir / name).read_text(encoding="utf-8") != body
    ]
