"""Open loop: one global, seeded arrival schedule that every worker computes alike.

Arrival k goes to worker k mod n, so the workers together issue exactly the
master's rate. Each arrival carries its intended start (unix time) and language;
latencies count from it, which corrects for coordinated omission.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import gevent
from gevent.queue import Queue

from llmchaos import languages
from loadtests.load_profile import Profile, Stage
from loadtests.options import Settings


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
    stages: tuple[tuple[float, float | None], ...] = ()  # (duration, rate) of a profile; empty: `rate` throughout
    ramp: bool = False

    @classmethod
    def for_run(cls, settings: Settings, t0: float, worker: int = 0, workers: int = 1) -> ArrivalPlan:
        """Worker `worker` of `workers`'s share of the run's schedule from unix time `t0`."""
        o, prof = settings.options, settings.profile
        stages = tuple((s.duration, s.rate) for s in prof.stages) if prof else ()
        return cls(
            t0,
            o.rate,
            o.arrival,
            o.burstiness,
            o.seed,
            settings.langs,
            tuple(languages.get(t).weight for t in settings.langs),
            None,
            worker,
            workers,
            stages,
            bool(prof and prof.ramp),
        )

    def message(self) -> dict[str, Any]:
        """As the master sends it to a worker (Locust's messages carry plain data)."""
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> ArrivalPlan:
        return cls(
            **{
                **data,
                "langs": tuple(data["langs"]),
                "weights": tuple(data["weights"]),
                "stages": tuple(map(tuple, data["stages"])),
            }
        )

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


class Arrivals:
    """This process's arrivals, queued per language as they fall due; a user of that language takes
    the next one and sends its request then."""

    def __init__(self) -> None:
        self.queues: defaultdict[str, Queue] = defaultdict(Queue)
        self._greenlet: gevent.Greenlet | None = None

    def start(self, plan: ArrivalPlan) -> None:
        self.stop()
        self._greenlet = gevent.spawn(self._dispatch, plan)

    def _dispatch(self, plan: ArrivalPlan) -> None:
        for k, due, lang in schedule(plan):
            # again when woken early: libev dates a sleep from its loop's last look at the clock
            while (wait := due - time.time()) > 0:
                gevent.sleep(wait)
            self.queues[lang].put((k, due))

    def next(self, lang: str) -> float:
        """Wait for the next arrival in `lang`; its intended start (unix time)."""
        _, due = self.queues[lang].get()
        return float(due)

    def stop(self) -> list[tuple[str, float]]:
        """Stop issuing; (lang, intended start) of every arrival that fell due but was never sent."""
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        unsent = []
        for lang, q in self.queues.items():
            while not q.empty():
                unsent.append((lang, q.get()[1]))
        return unsent
