"""A run's report, read back through the core's run model: the same per-language table the load
test prints at its end, then the fault windows as they ran."""

from __future__ import annotations

from pathlib import Path

from llmchaos import run
from llmchaos.run.table import table


def summary(run_dir: str | Path) -> str:
    results = run.load(run_dir)
    lines = [table(results.run, results.histograms, str(results.path))]
    for w in results.run.faults:
        if w.actual_start is None:
            ran = "never applied"
        else:
            ran = (
                run.iso(w.actual_start)
                + " -> "
                + (run.iso(w.actual_end) if w.actual_end is not None else "not reverted")
            )
        lines.append(f"fault {w.name} ({w.kind}): {ran}" + (f"; {w.error}" if w.error else ""))
    return "\n".join(lines)
