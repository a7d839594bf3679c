"""The metric names some code defines, read statically from the source of the core's metric table
(`llmchaos_*`, which the dashboards also import) and the reference server's (`vllm:*`, `DCGM_*`):
dashboards import only the core, so the server's are string literals found in its files."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = (
    "llmchaos/metrics.py",
    "reference_server/metrics.py",
    "reference_server/gpu_telemetry.py",
    "reference_server/cluster/metrics.py",
    "reference_server/disagg/metrics.py",
)
CHECKED = re.compile(r"(?<![A-Za-z0-9_:])(llmchaos_[A-Za-z0-9_]+|vllm:[A-Za-z0-9_:]+|DCGM_[A-Za-z0-9_]+)")
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum", "_created")  # what Prometheus shows of a family


@functools.cache
def defined(root: Path = ROOT, files: tuple[str, ...] = DEFINITIONS) -> frozenset[str]:
    """Every string literal of `files` that is a whole checked metric name."""
    names: set[str] = set()
    for rel in files:
        tree = ast.parse((root / rel).read_text(encoding="utf-8"), rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CHECKED.fullmatch(node.value):
                names.add(node.value)
    return frozenset(names)


def queried(expr: str) -> set[str]:
    """The checked metric names a PromQL expression (or a Grafana variable query) reads."""
    return set(CHECKED.findall(expr))


def unknown(expr: str, known: frozenset[str]) -> list[str]:
    """The names `expr` reads that no family in `known` exposes."""
    return sorted(n for n in queried(expr) if not any(n.removesuffix(s) in known for s in SUFFIXES if n.endswith(s)))
