"""Results directories read for a comparison, through the core's run model: each run's requests as
columns, reduced to cells whose exact percentiles are the run's histograms'.

A side is one or more runs (repetitions); a directory that holds runs rather than being one (a
nightly baseline folder) stands for all of them, and a replay's directory for its two sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dashboards.comparison.columns import Columns, read
from dashboards.comparison.sample import PCTS, CellKey, RunSample, reduce
from llmchaos import run
from llmchaos.errors import UsageError
from llmchaos.run.store import RUN_JSON


@dataclass(frozen=True)
class Loaded:
    results: run.RunResults
    columns: Columns
    sample: RunSample

    @property
    def name(self) -> str:
        return self.sample.name


def load(path: Path) -> Loaded:
    results = run.load(path)
    cols = read(results.run, results.requests())
    hist = results.histograms

    def exact(key: CellKey) -> dict[str, float] | None:
        h = hist.combined(key.metric, lang=key.lang, phase=key.phase)
        return {name: h.quantile(p) for name, p in PCTS.items()} if h is not None and h.count else None

    return Loaded(results, cols, reduce(str(path), cols, exact, notes(results)))


def notes(results: run.RunResults) -> tuple[str, ...]:
    """What a reader of a comparison should know about this run."""
    out = []
    rate = results.run.requests.sample_rate
    if rate < 1:
        out.append(
            f"{results.path}: requests.jsonl holds a {rate:.0%} sample: percentiles are the histograms' (every "
            "request), their intervals and the rates come from the sample (wider than with every request)"
        )
    if not results.run.validity.valid:
        out.append(f"{results.path}: marked invalid ({', '.join(results.run.validity.flags)})")
    return tuple(out)


def expand(spec: str | Path) -> list[Path]:
    """A run directory, or a directory of run directories (each of its subdirectories with a run.json)."""
    path = Path(spec)
    if (path / RUN_JSON).is_file() or not path.is_dir():
        return [path]
    runs = sorted(p for p in path.iterdir() if (p / RUN_JSON).is_file())
    return runs or [path]


def side(specs: list[str]) -> list[Loaded]:
    """One side of a comparison: every run the specs name (commas separate several in one spec)."""
    paths = [p for spec in specs for part in str(spec).split(",") if part.strip() for p in expand(part.strip())]
    if not paths:
        raise UsageError("no run given", field="--a/--b")
    return [load(p) for p in paths]


def replay_sides(spec: str) -> tuple[str, str] | None:
    """A replay's results directory (`<run_id>/a` and `<run_id>/b`) as its two sides."""
    path = Path(spec)
    if not (path / RUN_JSON).is_file() and (path / "a").is_dir() and (path / "b").is_dir():
        return str(path / "a"), str(path / "b")
    return None
