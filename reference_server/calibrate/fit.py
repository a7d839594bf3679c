"""Fit a step model: the terms that make the virtual engine's statistics at every fitted level closest
to the measured ones, by Nelder-Mead (scipy) over the terms' logarithms (so none goes negative).

The loss is the sum of squared relative errors plus four times the largest squared, so that no
level is given up for the rest. Every run of the virtual engine is seeded: the same levels and
start give the same fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize

from reference_server.calibrate.level import Level, Stats, errors
from reference_server.calibrate.virtual import serve
from reference_server.profile import Profile, StepModel

FREE = ("overhead", "memory", "prefill_token", "decode_token", "wake", "frontend", "frontend_sigma")
FREE_RUNS = FREE[:-1]  # runs are fitted on their p50s, which do not say how widely the frontend varies
FLOOR = 1e-9  # a term at zero starts here (its logarithm must exist)


@dataclass(frozen=True)
class Row:
    level: Level
    simulated: Stats

    @property
    def errors(self) -> list[float]:
        return errors(self.level, self.simulated)


def evaluate(server: Profile, step: StepModel, levels: tuple[Level, ...]) -> list[Row]:
    """Each level through the virtual engine of `server`'s limits under `step`."""
    p = replace(server, step=step)
    return [Row(level, level.simulated(serve(p, level.arrivals, seed=i))) for i, level in enumerate(levels)]


def loss(rows: list[Row]) -> float:
    e = np.array([x for row in rows if row.level.fit for x in row.errors])
    return float(np.sum(e**2) + 4 * np.max(e**2)) if e.size and np.all(np.isfinite(e)) else 1e9


def fit(server: Profile, start: StepModel, levels: tuple[Level, ...], free: tuple[str, ...], evals: int) -> StepModel:
    """The step model, from `start`, whose `free` terms minimize the loss over the fitted levels."""
    fitted = tuple(level for level in levels if level.fit)
    x0 = np.log([max(getattr(start, name), FLOOR) for name in free])

    def step_of(x: np.ndarray) -> StepModel:
        return replace(start, **{name: float(v) for name, v in zip(free, np.exp(x), strict=True)})

    def objective(x: np.ndarray) -> float:
        return loss(evaluate(server, step_of(x), fitted))

    simplex = np.array([x0] + [x0 + 0.25 * np.eye(len(free))[i] for i in range(len(free))])
    best = minimize(
        objective,
        x0,
        method="Nelder-Mead",
        options={"maxfev": evals, "initial_simplex": simplex, "xatol": 1e-3, "fatol": 1e-9},
    )
    return step_of(best.x)


def first_guess(levels: tuple[Level, ...], base: StepModel) -> StepModel:
    """A start for a fit to runs, whatever the server: the straight line (overhead + math per token)
    through the fitted levels' mean step times against the tokens a step computes (Little's law:
    arrivals x step x prompt, plus the sequences decoding), and the frontend time their lowest level's
    TTFT leaves over after its prefill step."""
    rows, steps = [], []
    for level in levels:
        if not level.fit or (step := level.measured.per_token) is None:
            continue
        a = level.arrivals
        rate = len(a) / max(a[-1].at - a[0].at, 1e-9)
        prompt = float(np.mean([x.prompt - x.shared for x in a]))
        decoding = rate * (float(np.mean([x.output for x in a])) - 1) * step
        rows.append([1.0, rate * step * prompt + decoding])
        steps.append(step)
    (overhead, per_token), *_ = np.linalg.lstsq(np.array(rows), np.array(steps), rcond=None)
    overhead, per_token = max(float(overhead), 0.1 * min(steps)), max(float(per_token), 1e-7)
    low = min((lv for lv in levels if lv.fit), key=lambda lv: len(lv.arrivals))
    prompt = float(np.mean([x.prompt - x.shared for x in low.arrivals]))
    ttft = low.measured.ttft_p50 or 0.0
    frontend = max(ttft - 1.1 * overhead - per_token * prompt, 1e-4)
    return replace(
        base,
        overhead=overhead,
        memory=0.05 * overhead,
        prefill_token=per_token,
        decode_token=per_token,
        wake=0.1 * overhead,
        frontend=frontend,
        frontend_sigma=0.1,
    )


def table(rows: list[Row]) -> str:
    """Measured against simulated, each statistic per level, in ms (req/s for a throughput)."""
    lines = [f"{'level':>12}  {'':4} {'statistic':10} {'measured':>9} {'simulated':>9} {'error':>7}"]
    for row in rows:
        kind = "fit" if row.level.fit else "held"
        for (name, m), (_, s) in zip(row.level.measured.items(), row.simulated.items(), strict=True):
            if m is None or s is None:
                continue
            scale = 1.0 if name == "throughput" else 1e3
            lines.append(
                f"{row.level.name:>12}  {kind:4} {name:10} {m * scale:9.2f} {s * scale:9.2f} {100 * (s / m - 1):+6.1f}%"
            )
    return "\n".join(lines)
