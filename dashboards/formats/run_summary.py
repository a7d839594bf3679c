"""A run's report as text, read back through the core's run model: the same per-language table the
load test prints at its end (with its cost), for a run with cost and fault phases each phase's latency
and cost against baseline, then the fault windows as they ran (a fault host's as it acknowledged
them, and each fault host's clock and contact) and the guard's trips (`llmchaos report`)."""

from __future__ import annotations

from pathlib import Path

from llmchaos import run
from llmchaos.run.table import table


def summary(run_dir: str | Path) -> str:
    results = run.load(run_dir)
    lines = [table(results.run, results.histograms, str(results.path))]
    if results.run.energy is not None:
        lines += against_baseline(results)
    if results.run.config.get("k8s_workflow"):
        lines.append(f"phases: from the cluster, Chaos Mesh Workflow {results.run.config['k8s_workflow']}'s steps")
    for w in results.run.faults:
        if w.host is not None:
            lines.append(remote(w))
            continue
        if w.actual_start is None:
            ran = "never applied"
        else:
            ran = (
                run.iso(w.actual_start)
                + " -> "
                + (run.iso(w.actual_end) if w.actual_end is not None else "not reverted")
            )
        lines.append(f"fault {w.name} ({w.kind}): {ran}" + (f"; {w.error}" if w.error else ""))
    lines += [host_line(h) for h in results.run.fault_hosts]
    for t in results.run.guard:
        over = f"over {t.threshold_ms:g} ms for {len(t.windows_ms)} windows of {t.window_s:g} s"
        if t.fault is not None:
            over = f"still over {t.threshold_ms:g} ms {t.tripped - t.started:.0f} s after {t.fault} was reverted"
        lines.append(
            f"guard: {t.lang} {t.metric} p{t.percentile:g} {over} at {run.iso(t.tripped)} in phase {t.phase}: "
            f"{', '.join(t.actions)}"
        )
    return "\n".join(lines)


def against_baseline(results: run.RunResults) -> list[str]:
    """A run with fault phases and cost figures: per language and phase, TTFT and ITL at p50 and p99,
    J/token and $/Mtok, each fault phase's beside its multiple of the baseline's."""
    from dashboards.formats import run_parts, text  # numpy and the statistics: only for a run with cost

    if not run_parts.fault_phases(results) or not run_parts.cost_columns(results.run):
        return []
    return [
        "per phase, against baseline:",
        *text.aligned(*run_parts.phase_rows(results, ("ttft", "itl"), ("p50", "p99"))),
    ]


def _after(t: float | None, intended: float, lag: float | None) -> str:
    if t is None:
        return "never acknowledged"
    return f"{t - intended:+.3f} s" + (f" (heard {lag:.3f} s after intended)" if lag is not None else "")


def remote(w: run.FaultWindow) -> str:
    """A fault host's window: intended, acknowledged apply and revert (master's clock), unconfirmed."""
    text = (
        f"fault {w.name} ({w.kind}) on {w.host}: intended {run.iso(w.planned_start)} -> {run.iso(w.planned_end)}; "
        f"applied {_after(w.actual_start, w.planned_start, w.apply_ack_lag_s)}, "
        f"reverted {_after(w.actual_end, w.planned_end, w.revert_ack_lag_s)}"
    )
    if len(w.spans) > 1:
        text += f"; applied {len(w.spans)} times"
    if w.unconfirmed:
        gaps = ", ".join(f"{a - w.planned_start:+.1f} s to {b - w.planned_start:+.1f} s" for a, b in w.unconfirmed)
        text += f"; unconfirmed (requests in phase {w.name}:unconfirmed) {gaps}"
    if w.why:
        text += f"; last reverted: {w.why}"
    return text + (f"; {w.error}" if w.error else "")


def host_line(h: run.FaultHost) -> str:
    if not h.connected:
        return f"fault host {h.name}: never connected"
    clock = (
        f"clock offset {h.offset_s * 1000:+.2f} ms ± {(h.uncertainty_s or 0) * 1000:.2f} ms over {h.acks} leases"
        if h.offset_s is not None
        else "no lease answered"
    )
    lost = "; ".join(
        f"lost contact {run.iso(a)} -> {run.iso(b) if b is not None else 'the end'}" for a, b in h.lost_contact
    )
    return f"fault host {h.name}: {clock}" + (f"; {lost}" if lost else "")
