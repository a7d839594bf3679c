"""Runs a schedule: each fault's windows on time, every applied fault reverted on every way out
(normal end, an exception, SIGINT/SIGTERM), and leftovers of a killed run swept first."""

from __future__ import annotations

import logging
import os
import threading
import time

import psutil

from faults.allow import Allowlist
from faults.injectors import KINDS
from faults.injectors.base import InjectError
from faults.journal import Journal
from faults.schedule import Schedule, Window
from llmchaos.errors import UsageError
from llmchaos.run import FaultWindow

log = logging.getLogger("llmchaos.faults")


def recover(journal: Journal, skip_live: bool = False) -> list[str]:
    """Revert whatever the journal still holds; returns one line per entry. With `skip_live`, the
    entries of another runner that is still alive are left to it."""
    lines = []
    for e in journal.entries():
        if skip_live and e["pid"] != os.getpid() and psutil.pid_exists(e["pid"]):
            continue
        try:
            KINDS[e["kind"]](e["target"]).revert(e.get("saved", {}))
            journal.remove(e["id"])
            lines.append(f"reverted {e['kind']} {e['name']} on {e['target']}")
        except (InjectError, KeyError) as err:
            lines.append(f"could not revert {e['kind']} {e['name']} on {e['target']}: {err}")
    return lines


def prepare(schedule: Schedule, path: str, journal: Journal, allow: Allowlist) -> None:
    """Before a run: sweep what a killed run left, then check every target can take its fault
    (UsageError naming the schedule's line otherwise), so nothing is applied if one cannot; and
    refuse a journal that cannot be written, since nothing could be reverted after a kill."""
    journal.check_writable()
    for line in recover(journal, skip_live=True):
        log.warning("swept a leftover fault: %s", line)
    for spec in schedule.faults:
        reason = KINDS[spec.kind](spec.target, allow).probe()
        if reason:
            raise UsageError(
                f"cannot inject {spec.kind}: {reason}",
                file=path,
                line=spec.target_line,
                field=f"faults[{schedule.faults.index(spec)}].target",
            )


class Runner:
    def __init__(self, schedule: Schedule, journal: Journal, horizon: float, allow: Allowlist = Allowlist()) -> None:
        self.schedule, self.journal, self.horizon, self.allow = schedule, journal, horizon, allow
        self.stopping = threading.Event()
        self.timeline: list[FaultWindow] = []  # as the windows run; read while they do
        self._threads: list[threading.Thread] = []

    def start(self, t0: float | None = None) -> float:
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
        injector = KINDS[windows[0].kind](windows[0].target, self.allow)
        reason = injector.probe()  # also opens its connections now rather than at the first window
        if reason:
            log.warning("%s: %s", windows[0].name, reason)
        for w in windows:
            rec = FaultWindow(
                name=w.name,
                kind=w.kind,
                target=w.target,
                params=w.params,
                planned_start=t0 + w.start,
                planned_end=t0 + w.end,
            )
            if self.stopping.wait(max(0.0, rec.planned_start - time.time())):
                return
            self.timeline.append(rec)
            try:
                saved = injector.save(w.params)
            except InjectError as e:
                rec.error = str(e)
                log.error("%s: %s", w.name, e)
                continue
            entry = self.journal.add(w.name, w.kind, w.target, w.params, saved)
            try:
                injector.apply(w.name, w.params, saved)
                rec.actual_start = time.time()
                self.stopping.wait(max(0.0, rec.planned_end - time.time()))
            except InjectError as e:
                rec.error = str(e)
                log.error("%s: %s", w.name, e)
            finally:
                try:
                    injector.revert(saved)
                    self.journal.remove(entry)
                    rec.actual_end = time.time()
                except InjectError as e:
                    rec.error = f"revert failed, left in the journal: {e}"
                    log.error("%s: %s", w.name, rec.error)
            if self.stopping.is_set():
                return

    def windows(self) -> list[FaultWindow]:
        """The windows that fell due, as they ran, in planned order."""
        return sorted(self.timeline, key=lambda a: a.planned_start)
