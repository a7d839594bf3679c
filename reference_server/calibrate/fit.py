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

FREE = ("overhead", "memory", "prefill_token", "decode_token", "frontend", "frontend_sigma")
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
