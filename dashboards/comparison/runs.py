"""Results directories read for a comparison, through the core's run model: each run's requests as
columns, reduced to cells whose exact percentiles are the run's histograms'.

A side is one or more runs (repetitions); a directory that holds runs rather than being one (a
nightly baseline folder) stands for all of them, and a replay's directory for its two sides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dashboards.comparison import cost
from dashboards.comparison.columns import DISTRIBUTIONS, Columns, read
from dashboards.comparison.sample import COSTS, PCTS, RATES_GROUP, CellKey, Known, Ratio, RunSample, reduce
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

    sample = reduce(str(path), cols, exact, notes(results))
    sample.cells.update(cost.cells(results.run, sample.blocks[RATES_GROUP]))
    known = unsampled(results, sample, exact)
    if known:
        langs = ", ".join(sorted({k.lang for k in known}))
        sample.cells.update(known)
        sample.notes += (
            f"{path}: requests.jsonl holds no request of some cells ({langs}): their percentiles are the "
            "histograms', their error rates run.json's counts, shown without an interval or a test; their SLO "
            "attainment and goodput per phase could not be computed",
        )
    return Loaded(results, cols, sample)


def unsampled(
    results: run.RunResults, sample: RunSample, exact: Callable[[CellKey], dict[str, float] | None]
) -> dict[CellKey, Known]:
    """The cells a run holds that its requests.jsonl has no request of (sampled, or empty): from the
    histograms and run.json's counts alone."""
    why = "no request of it in requests.jsonl to test with (its figures: the histograms', run.json's counts)"
    out: dict[CellKey, Known] = {}
    for key, h in results.histograms:
        cell = CellKey(key.lang, key.metric, key.phase)
        if key.metric in DISTRIBUTIONS and cell not in sample.cells and cell not in out and (figures := exact(cell)):
            out[cell] = Known(figures, float(h.count), why)
    for row in results.run.outcomes:
        cell = CellKey(row.lang, "error_rate", row.phase)
        if cell in sample.cells or cell in out:
            continue
        counted = results.run.issued_and_failed(row.lang, row.phase)
        if counted is not None and counted[0]:
            out[cell] = Known({"rate": counted[1] / counted[0]}, float(counted[0]), why)
    return out


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


ASKED = (  # the options that shape what is asked of the target: two runs that differ here measure other loads
    "api", "model", "max_tokens", "prompt_sizes", "long_context_tokens", "prefix_tokens", "prefixes", "no_stream",
    "langs", "rate", "arrival", "burstiness", "num_users", "shape", "levels", "stage_duration", "load_profile",
    "think_time", "run_time", "warmup", "log", "speed", "force_output_length",
)  # fmt: skip


def differences(a: list[Loaded], b: list[Loaded]) -> list[str]:
    """How the two sides' runs were configured differently, one line per option (what looks like a
    change of the target may be a change of the load)."""
    out = []
    for key in ASKED:
        seen_a = {repr(x.results.run.config.get(key)) for x in a}
        seen_b = {repr(x.results.run.config.get(key)) for x in b}
        if seen_a != seen_b:
            out.append(f"the runs differ in {key}: A {', '.join(sorted(seen_a))}; B {', '.join(sorted(seen_b))}")
    return out


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


def match_energy(a: Sequence[Loaded], b: Sequence[Loaded]) -> None:
    """Where the two sides' runs came by their energy in different ways (measured against modelled),
    every cost cell is shown, not tested: a change there could be the way's, not the target's."""
    sources = [{x.results.run.energy.source for x in side if x.results.run.energy is not None} for side in (a, b)]
    if len((sources[0] | sources[1]) - {"absent"}) < 2:
        return
    said = {side: ", ".join(sorted(s)) or "none" for side, s in zip("AB", sources, strict=True)}
    why = f"the sides' energy is not alike (A {said['A']}; B {said['B']}): not compared"
    for x in (*a, *b):
        cells = x.sample.cells
        for key, cell in cells.items():
            if key.metric in COSTS and isinstance(cell, Ratio):
                figure = cell.exact
                cells[key] = Known({} if figure is None else {"rate": figure}, float(cell.n), why, cell.blocks)
