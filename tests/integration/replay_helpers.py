"""Run the replay locustfile (one process, or a master with workers) and read each side's results."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import NamedTuple

from llmchaos import run
from llmchaos.histogram import HistogramSet
from tests.integration.loadtest_helpers import distributed, locust

REPLAY = "loadtests/replay/locustfile.py"


class Side(NamedTuple):
    path: Path
    run: dict
    hist: HistogramSet
    requests: list[dict]


def replay(*args: str, workers: int = 0, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """`locust -f loadtests/replay/locustfile.py ARGS`, in one process or a master with `workers` workers."""
    if workers:
        return distributed(*args, workers=workers, timeout=timeout, file=REPLAY)
    return locust(*args, timeout=timeout, file=REPLAY)


def sides(results_dir: Path) -> dict[str, Side]:
    """Each side of the one replay under `results_dir` (DIR/<run_id>/a and /b), read through the run model."""
    (run_dir,) = [p for p in results_dir.iterdir() if p.is_dir()]
    out = {}
    for side in sorted(p for p in run_dir.iterdir() if p.is_dir()):
        loaded = run.load(side)
        out[side.name] = Side(
            side, loaded.run.to_json(), loaded.histograms, [dataclasses.asdict(r) for r in loaded.requests()]
        )
    return out
