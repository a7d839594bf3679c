"""What a token cost, as a comparison reads it from run.json: per (lang, phase), J/token and $/Mtok.

The cells are ratios of per-block sums, like the error rate's: each sampling interval of
`energy.blocks` (one run's own targets) falls in the comparison block of its middle, and a block's
joules (or dollars: GPU-hours at the price per GPU-hour plus kWh at the price per kWh, a price not
given counting as none) are its numerator, its output tokens the denominator. Where a run's energy
is absent, or the runs' energy came from different sources (measured against modelled), the cells
are shown, never tested. A run that asked for no energy (no `energy`) has no cost cells.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dashboards.comparison.blocks import Blocks
from dashboards.comparison.sample import COSTS, Cell, CellKey, Known, Ratio
from llmchaos.run import Cost, Run

PER_MTOK = 1e6


def cells(run: Run, bl: Blocks) -> dict[CellKey, Cell]:
    """The run's cost cells on the comparison's blocks."""
    energy = run.energy
    if energy is None:
        return {}
    requests = {key: spent.requests for key, spent in per_phase(run.cost).items()}
    if energy.source == "absent":
        why = "its energy is absent" + (f" ({energy.why})" if energy.why else "")
        return {CellKey(lang, m, phase): Known({}, n, why) for (lang, phase), n in requests.items() for m in COSTS}
    mine = [b for b in energy.blocks if b.target in run.targets]
    if not mine:
        return {}
    names = sorted({(b.lang, b.phase) for b in mine})
    index = {name: i for i, name in enumerate(names)}
    mid = np.array([(b.start + b.end) / 2 for b in mine])
    at = np.array([index[(b.lang, b.phase)] for b in mine], dtype=np.int64) * bl.count + bl.index(mid)

    def per_block(values: np.ndarray) -> np.ndarray:
        return np.bincount(at, weights=values, minlength=len(names) * bl.count).reshape(len(names), bl.count)

    joules, tokens = (np.array([getattr(b, f) for b in mine]) for f in ("energy_j", "tokens"))
    priced = [energy.usd(b.gpu_s, b.energy_j) for b in mine]
    money = None if priced[0] is None else np.array(priced, dtype=float)
    nums = {"j_per_token": per_block(joules)} | ({} if money is None else {"usd_per_mtok": per_block(money) * PER_MTOK})
    den = per_block(tokens)
    out: dict[CellKey, Cell] = {}
    for i, (lang, phase) in enumerate(names):
        n, used = requests.get((lang, phase), 0), int((den[i] > 0).sum())
        for metric, num in nums.items():
            out[CellKey(lang, metric, phase)] = Ratio(num[i], den[i], n, used, of_requests=False)
    return out


@dataclass(frozen=True)
class Spent:
    """One (lang, phase)'s cost over its run.json rows: sums (None: no row has the figure), and the
    figures made of them."""

    source: str
    tokens: float
    requests: int
    energy_j: float | None
    usd: float | None
    why: str | None

    @property
    def j_per_token(self) -> float | None:
        return self.energy_j / self.tokens if self.energy_j is not None and self.tokens else None

    @property
    def j_per_request(self) -> float | None:
        return self.energy_j / self.requests if self.energy_j is not None and self.requests else None

    @property
    def usd_per_mtok(self) -> float | None:
        return self.usd / self.tokens * PER_MTOK if self.usd is not None and self.tokens else None


def per_phase(rows: Iterable[Cost]) -> dict[tuple[str, str], Spent]:
    """Each (lang, phase)'s rows, of every target and API, added up."""
    groups: dict[tuple[str, str], list[Cost]] = {}
    for c in rows:
        groups.setdefault((c.lang, c.phase), []).append(c)
    return {key: added(group) for key, group in groups.items()}


def added(rows: list[Cost]) -> Spent:
    """Rows' cost together (the figures over the rows that have them)."""
    measured = [c for c in rows if c.energy_j is not None]
    counted, priced = measured or rows, [c.usd for c in measured if c.usd is not None]
    return Spent(
        "+".join(sorted({c.source for c in rows})),
        sum(c.tokens for c in counted),
        sum(c.requests for c in counted),
        sum(c.energy_j or 0.0 for c in measured) if measured else None,
        sum(priced) if priced else None,
        "; ".join(sorted({c.why for c in rows if c.why})) or None,
    )
