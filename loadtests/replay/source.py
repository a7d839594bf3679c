"""The log as the harness's source: the replay's settings read and the log checked on the master (or
a single process), each worker's share planned from them, the next request due handed to a user,
and what a request's end leaves: its session's next turn, its text's hash, a mirrored pair, the
fidelity figures."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from typing import Any

from llmchaos.errors import UsageError
from loadtests.collector import Collector
from loadtests.exporters import Exporter, FaultState
from loadtests.logs.problems import Problems
from loadtests.options import Settings
from loadtests.record import RequestRecord
from loadtests.replay.dispatch import LogDue, ReplayPlan, ReplaySchedule
from loadtests.replay.fidelity import ReplayStats
from loadtests.replay.settings import ReplaySettings
from loadtests.replay.sides import ReplayWriter
from loadtests.results import RunWriter
from loadtests.sources import Due, Source


class ReplaySource(Source):
    def __init__(self, settings: Settings, host: str) -> None:
        self.replay: ReplaySettings | None = None  # from the options (master, single process) or the plan
        self.stats = ReplayStats()
        self.schedule = ReplaySchedule(self.stats, lambda: None)
        super().__init__(settings, host)

    def configure(self, settings: Settings, host: str, is_worker: bool) -> None:
        """The replay's settings with the log checked: its format and first lines now, every line with
        --strict (a bad one: exit 2). A worker's options come with its plan."""
        self.settings = settings
        if is_worker:
            return
        self.replay = r = ReplaySettings.read(settings.options)
        self.sides = dict(r.targets)
        self.stats = self.schedule.stats = ReplayStats(r.source.path)
        r.source.rereadable("--log")
        records = r.source.read(Problems(r.source.path, strict=r.strict))
        if r.strict:
            deque(records, maxlen=0)  # every line, before anything runs
        else:
            next(records, None)  # its format, and a CSV's header

    def plan(self, t0: float, worker: int, workers: int) -> dict[str, Any] | None:
        assert self.replay is not None  # configured on the master and a single process
        self.stats.t0 = t0
        return ReplayPlan(t0, worker, workers, self.replay.options).message()

    def start(self, plan: dict[str, Any], on_share_done: Callable[[], None]) -> None:
        self.schedule.on_finished = on_share_done
        try:
            self.replay = self.schedule.start(ReplayPlan.from_message(plan))
        except UsageError as e:  # checked by the master already: only a log changed since
            raise RuntimeError(f"llmchaos replay: {e}") from None
        self.sides = dict(self.replay.targets)

    def next(self, lang: str, user: int) -> Due:
        return self.schedule.next()

    def ended(self, due: Due, records: dict[str, RequestRecord]) -> None:
        """Its session's next turn may go; each text hashed; a mirrored pair's answers compared;
        the fidelity figures of each side's request (not one the end of the test cut short)."""
        assert isinstance(due, LogDue)  # this source hands out only its own
        self.schedule.done(due)
        for rec in records.values():
            if rec.replay is not None and rec.chunks:
                rec.replay.text_sha256 = hashlib.sha256(rec.text.encode()).hexdigest()[:16]
        pair = [records.get("a"), records.get("b")]
        a, b = pair
        if a is not None and b is not None and a.outcome == b.outcome == "ok" and a.replay and b.replay:
            same = a.replay.text_sha256 == b.replay.text_sha256
            a.replay.peer_output_tokens, a.replay.identical = b.output_tokens, same
            b.replay.peer_output_tokens, b.replay.identical = a.output_tokens, same
            self.stats.pair(due.lang, same, a, b)
        for side, rec in records.items():
            if not rec.at_stop:
                self.stats.done(side, rec, due.requested)

    def stop(self) -> list[Due]:
        return list(self.schedule.stop())

    def shipment(self) -> dict[str, Any]:
        return self.stats.drain()

    def results(
        self, settings: Settings, exporter: Exporter, local: Collector | None, faults: FaultState | None
    ) -> RunWriter:
        assert self.replay is not None
        stats = self.stats if local is not None else ReplayStats(self.replay.source.path)
        return ReplayWriter(settings, self.replay, stats, exporter, local, faults)
