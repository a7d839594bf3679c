"""Runs a schedule: each target's windows in order and on time, every applied fault reverted on
every way out (normal end, an exception, SIGINT/SIGTERM), and never a fault left unaccounted for.

One thread per (kind, target), whose windows never overlap: it takes them one after another from a
lazy merge of its faults' windows, so thousands of windows cost no more threads or memory than a
few. A window that falls due while the previous one's revert is still running starts late (and is
recorded so), never skipped. Each window: save what the revert restores and write the journal just
before it is due, apply, wait, revert, remove the journal entry; `stop` waits for those reverts up to
its deadline and records any window still being applied or reverted then as left in the journal.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from faults.allow import Allowlist
from faults.injectors import KINDS
from faults.injectors.base import InjectError, Injector, TargetGone
from faults.journal import LEFT, Journal
from faults.schedule import FaultSpec, Schedule, Window
from llmchaos.errors import UsageError
from llmchaos.run import FaultWindow

log = logging.getLogger("llmchaos.faults")

TEST_PAUSE_ENV = "LLMCHAOS_FAULTS_TEST_PAUSE"
STAGES = ("before-journal", "before-apply", "in-apply", "in-revert")
PREPARE_LEAD_S = 0.05  # a window's state is saved and journaled this long before it is due, so it applies on time


def _test_pause(stage: str) -> None:
    """A test seam, off unless the environment names a stage (the crash tests): the runner process
    stops itself (SIGSTOP) when a window reaches `stage`, so a test can kill it exactly there.
    before-journal: due, nothing written; before-apply: in the journal, not applied; in-apply: the
    target changed, the runner not yet told; in-revert: the target restored, still in the journal."""
    if os.environ.get(TEST_PAUSE_ENV) == stage:  # this thread's own SIGSTOP: it stops before going on
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


class Runner:
    def __init__(self, schedule: Schedule, journal: Journal, horizon: float, allow: Allowlist = Allowlist()) -> None:
        self.schedule, self.journal, self.horizon, self.allow = schedule, journal, horizon, allow
        self.stopping = threading.Event()
        self.timeline: list[FaultWindow] = []  # as the windows fall due; read while they run
        self.active: set[str] = set()  # the faults applied right now
        self._threads: list[threading.Thread] = []
        self._busy: dict[int, FaultWindow] = {}  # the windows being applied, held or reverted
        self._end = self._stopped_at = float("inf")

    def start(self, t0: float | None = None) -> float:
        t0 = t0 if t0 is not None else time.time()
        self._end = t0 + self.horizon  # a window still on then ends there
        for specs in self.schedule.by_target().values():
            t = threading.Thread(target=self._run_target, args=(t0, specs), name=f"faults-{specs[0].name}", daemon=True)
            t.start()
            self._threads.append(t)
        return t0

    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def stop(self, timeout: float = 1.0) -> None:
        """End now: every fault still active is reverted before this returns, or by `timeout`; a window
        still being applied or reverted then is recorded as left in the journal."""
        self._stopped_at = min(self._stopped_at, time.time())
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for rec in list(self._busy.values()):
            rec.error = f"still being applied or reverted when the run ended: {LEFT}"

    def _run_target(self, t0: float, specs: list[FaultSpec]) -> None:
        injector = KINDS[specs[0].kind](specs[0].target, self.allow)
        reason = injector.probe()  # also opens its connections now rather than at the first window
        if reason:
            log.warning("%s: %s", specs[0].name, reason)
        for w in self.schedule.windows(self.horizon, specs):
            rec = FaultWindow(
                name=w.name,
                kind=w.kind,
                target=w.target,
                params=w.params,
                planned_start=t0 + w.start,
                planned_end=t0 + w.end,
            )
            stopped = self.stopping.wait(max(0.0, rec.planned_start - PREPARE_LEAD_S - time.time()))
            if stopped and rec.planned_start > self._stopped_at:
                return
            self.timeline.append(rec)
            if stopped:
                continue  # it fell due behind a late window and the run stopped first: never started
            self._busy[id(rec)] = rec
            try:
                self._window(injector, w, rec)
            finally:
                del self._busy[id(rec)]

    def _window(self, injector: Injector, w: Window, rec: FaultWindow) -> None:
        """One window on its target: journal, apply, hold, revert, unjournal; errors go into `rec`."""
        _test_pause("before-journal")
        try:
            saved = injector.save(w.params)
            entry = self.journal.add(w.name, w.kind, w.target, w.params, saved)
        except (InjectError, OSError, UsageError) as e:  # UsageError: the journal was found damaged
            rec.error = f"not applied: {e}"
            log.error("%s: %s", w.name, rec.error)
            return
        _test_pause("before-apply")
        self.stopping.wait(max(0.0, rec.planned_start - time.time()))
        if not self.stopping.is_set() and not self._apply_and_revert(injector, w, rec, saved, entry):
            return
        try:
            self.journal.remove(entry)
        except (OSError, UsageError) as e:
            rec.error = f"reverted, but the journal could not be updated: {e}"
            log.error("%s: %s", w.name, rec.error)

    def _apply_and_revert(self, injector: Injector, w: Window, rec: FaultWindow, saved: dict, entry: str) -> bool:
        """Apply, hold until the window ends (or the run stops), revert; whether the revert worked."""
        try:
            applied = injector.apply(w.name, w.params, saved)
            applied_at = time.time()  # in effect: before the journal's write, which a busy disk can hold up
            _test_pause("in-apply")
            if applied:
                saved = {**saved, **applied}
                self.journal.update(entry, saved)
            rec.actual_start = applied_at
            self.active.add(w.name)
            self.stopping.wait(max(0.0, min(rec.planned_end, self._end) - time.time()))
        except Exception as e:  # noqa: BLE001 - whatever apply raised, the revert below must still run
            rec.error = str(e) if isinstance(e, InjectError) else f"{type(e).__name__}: {e}"
            log.error("%s: %s", w.name, rec.error)
        try:
            injector.revert(saved)
        except TargetGone as e:
            log.warning("%s: %s; nothing left to revert", w.name, e)
        except InjectError as e:
            rec.error = f"revert failed, {LEFT}: {e}"
            log.error("%s: %s", w.name, rec.error)
            return False
        finally:
            self.active.discard(w.name)
        if rec.actual_start is not None:
            rec.actual_end = time.time()  # reverted: before the journal's write, as at the start
        _test_pause("in-revert")
        return True

    def windows(self) -> list[FaultWindow]:
        """The windows that fell due, as they ran, in planned order."""
        return sorted(self.timeline, key=lambda a: a.planned_start)
