"""`llmchaos report RUN [--html FILE]`: a run's report, read back through the core's run model: the
same per-language table the load test prints at its end, then the fault windows as they ran and the
guard's trips; `--html` writes the self-contained report a person reads (`formats.html.run_report`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from llmchaos import run
from llmchaos.cli import Subparsers
from llmchaos.errors import UsageError
from llmchaos.run.table import table


def register(sub: Subparsers) -> None:
    p = sub.add_parser("report", help="a results directory's per-language summary (and an HTML report)")
    p.add_argument("run", help="a results directory, DIR/<run_id>")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report of the run")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    print(summary(args.run))
    if args.html:
        write_html(args.run, args.html)
    return 0


def summary(run_dir: str | Path) -> str:
    results = run.load(run_dir)
    lines = [table(results.run, results.histograms, str(results.path))]
    if results.run.config.get("k8s_workflow"):
        lines.append(f"phases: from the cluster, Chaos Mesh Workflow {results.run.config['k8s_workflow']}'s steps")
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
    for t in results.run.guard:
        lines.append(
            f"guard: {t.lang} {t.metric} p{t.percentile:g} over {t.threshold_ms:g} ms for {len(t.windows_ms)} windows "
            f"of {t.window_s:g} s at {run.iso(t.tripped)} in phase {t.phase}: {', '.join(t.actions)}"
        )
    return "\n".join(lines)


def write_html(run_dir: str | Path, path: str | Path) -> None:
    from dashboards.comparison import runs
    from dashboards.formats.html import run_report

    content = run_report(runs.load(Path(run_dir)))
    try:
        Path(path).write_text(content, encoding="utf-8")
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=str(path), field="--html") from None
