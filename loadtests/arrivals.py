"""Open loop: one global, seeded arrival schedule that every worker computes alike.

Arrival k goes to worker k mod n, so the workers together issue exactly the
master's rate. Each arrival carries its intended start (unix time) and language;
latencies count from it, which corrects for coordinated omission.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from loadtests.profile import Profile, Stage


@dataclass(frozen=True)
class ArrivalPlan:
    """What the master broadcasts at test start."""

    t0: float  # unix time of the schedule's origin
    rate: float  # req/s when no profile stage gives one
    arrival: str  # poisson | gamma | constant
    burstiness: float  # gamma shape: 1 = Poisson, < 1 burstier, > 1 smoother
    seed: int
    langs: tuple[str, ...]
    weights: tuple[float, ...]
    duration: float | None  # stop generating after this many seconds (None: until stopped)
    worker: int = 0
    workers: int = 1
    stages: tuple[tuple[float, float], ...] = ()  # (duration, rate) of a profile; empty: `rate` throughout
    ramp: bool = False

    def rate_at(self, t: float) -> float | None:
        """The master's rate at `t` seconds into the schedule; None once a profile is over."""
        if not self.stages:
            return self.rate
        return Profile(tuple(Stage(d, rate=r) for d, r in self.stages), self.ramp).rate(t)


def interval(kind: str, rate: float, burstiness: float, rng: random.Random) -> float:
    if kind == "poisson":
        return rng.expovariate(rate)
    if kind == "gamma":
        return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
    return 1.0 / rate


def schedule(plan: ArrivalPlan) -> Iterator[tuple[int, float, str]]:
    """This worker's share: (index, intended unix time, lang), in time order."""
    rng = random.Random(plan.seed)
    t, k = 0.0, 0
    while (rate := plan.rate_at(t)) is not None:
        t += interval(plan.arrival, rate, plan.burstiness, rng)
        if plan.rate_at(t) is None or (plan.duration is not None and t >= plan.duration):
            return
        lang = rng.choices(plan.langs, plan.weights)[0]
        if k % plan.workers == plan.worker:
            yield k, plan.t0 + t, lang
        k += 1
