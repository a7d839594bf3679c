"""Runs a schedule: each fault's windows on time, every applied fault reverted on every way out
(normal end, an exception, SIGINT/SIGTERM), and leftovers of a killed run swept first."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from faults.base import InjectError
from faults.gpu_clock import GpuClock
from faults.journal import Journal
from faults.netem import Netem
from faults.schedule import Schedule, Window
from faults.sse import SSE
from faults.tbf import Tbf

log = logging.getLogger("llmchaos.faults")
KINDS: dict[str, type] = {k.kind: k for k in (SSE, GpuClock, Netem, Tbf)}


@dataclass
class Applied:
    """A window as it really ran (unix times), for the run's fault timeline."""

    name: str
    kind: str
    target: dict
    params: dict
    planned_start: float
    planned_end: float
    actual_start: float | None = None
    actual_end: float | None = None
    error: str | None = None


def recover(journal: Journal) -> list[str]:
    """Revert whatever the journal still holds; returns one line per entry."""
    lines = []
    for e in journal.entries():
        try:
            KINDS[e["kind"]](e["target"]).revert()
            journal.remove(e["id"])
            lines.append(f"reverted {e['kind']} {e['name']} on {e['target']}")
        except (InjectError, KeyError) as err:
            lines.append(f"could not revert {e['kind']} {e['name']} on {e['target']}: {err}")
    return lines


class Runner:
    def __init__(self, schedule: Schedule, journal: Journal, horizon: float,
                 on_change: Callable[[Applied, bool], None] | None = None) -> None:
        self.schedule, self.journal, self.horizon = schedule, journal, horizon
        self.stopping = threading.Event()
        self.timeline: list[Applied] = []
        self.on_change = on_change
        self._threads: list[threading.Thread] = []

    def start(self, t0: float | None = None) -> float:
        for line in recover(self.journal):
            log.warning("swept a leftover fault: %s", line)
        t0 = t0 if t0 is not None else time.time()
        by_fault: dict[str, list[Window]] = {}
        for w in self.schedule.windows(self.horizon):
            by_fault.setdefault(w.name, []).append(w)
        for name, windows in by_fault.items():
            t = threading.Thread(target=self._run_fault, args=(t0, windows), name=f"fault-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return t0

    def stop(self, timeout: float = 1.0) -> None:
        """End now: every fault still active is reverted before this returns (or `timeout`)."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def wait(self) -> None:
        for t in self._threads:
            while t.is_alive() and not self.stopping.is_set():
                t.join(0.2)

    def _run_fault(self, t0: float, windows: list[Window]) -> None:
        injector = KINDS[windows[0].kind](windows[0].target)
        for w in windows:
            rec = Applied(w.name, w.kind, w.target, w.params, t0 + w.start, t0 + w.end)
            if self.stopping.wait(max(0.0, rec.planned_start - time.time())):
                return
            self.timeline.append(rec)
            entry = self.journal.add(w.name, w.kind, w.target, w.params)
            try:
                injector.apply(w.name, w.params)
                rec.actual_start = time.time()
                self._changed(rec, True)
                self.stopping.wait(max(0.0, rec.planned_end - time.time()))
            except InjectError as e:
                rec.error = str(e)
                log.error("%s: %s", w.name, e)
            finally:
                try:
                    injector.revert()
                    self.journal.remove(entry)
                    rec.actual_end = time.time()
                    self._changed(rec, False)
                except InjectError as e:
                    rec.error = f"revert failed, left in the journal: {e}"
                    log.error("%s: %s", w.name, rec.error)
            if self.stopping.is_set():
                return

    def _changed(self, rec: Applied, active: bool) -> None:
        if self.on_change is not None:
            self.on_change(rec, active)

    def timeline_json(self) -> list[dict]:
        return [asdict(a) for a in sorted(self.timeline, key=lambda a: a.planned_start)]
