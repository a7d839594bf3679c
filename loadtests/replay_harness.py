"""The harness of a replay: the load test's harness (faults and phases, measuring, merging,
exporting) with the log's schedule instead of a rate, requests built from the log, a second target,
and results written per side."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

import gevent
from locust.env import Environment
from locust.rpc import Message

from llmchaos.errors import UsageError
from llmchaos.run import ReplayFields
from llmchaos.wire import REQUEST_ID_HEADER
from loadtests.adapters import ADAPTERS, Call
from loadtests.exporters import Exporter
from loadtests.harness import Harness
from loadtests.logs.problems import Problems
from loadtests.options import parsed_options
from loadtests.record import RequestRecord
from loadtests.replay_options import ReplaySettings
from loadtests.replay_report import ReplayReport
from loadtests.replay_schedule import Due, ReplayPlan, ReplaySchedule
from loadtests.replay_stats import ReplayStats
from loadtests.report import Report

if TYPE_CHECKING:
    from loadtests.replay_users import ReplayUser

DONE_MSG = "llmchaos_replay_done"  # a worker has sent (and seen end) every request of its share


class ReplayHarness(Harness):
    def __init__(self, env: Environment) -> None:
        self.replay: ReplaySettings | None = None
        self.stats = ReplayStats()
        self.schedule = ReplaySchedule(self.stats, self._share_done)
        self.workers_done: set[str] = set()
        self.local_done = False
        super().__init__(env)
        if self.is_master:
            env.runner.register_message(DONE_MSG, self._worker_done)  # type: ignore[union-attr]  # is_master

    def configure(self) -> None:
        """The load test's settings and, on the master or a single process, the replay's, with the log
        checked: its format and first lines now, every line with --strict (a bad one: exit 2)."""
        super().configure()
        if self.is_worker:
            return  # its options come with the plan
        self.replay = r = ReplaySettings.read(parsed_options(self.env))
        self.stats = self.schedule.stats = ReplayStats(r.source.path)
        problems = Problems(r.source.path, strict=r.strict)
        records = r.source.read(problems)
        if r.strict:
            deque(records, maxlen=0)  # every line, before anything runs
        else:
            next(records, None)  # its format, and a CSV's header

    # -- the schedule ---------------------------------------------------------------------------
    def arrival_plan(self, t0: float, worker: int = 0, workers: int = 1) -> dict[str, Any] | None:
        assert self.replay is not None  # configured on the master and a single process
        self.stats.t0 = t0
        return ReplayPlan(t0, worker, workers, self.replay.options).message()

    def start_arrivals(self, plan: dict[str, Any]) -> None:
        self.local_done = False
        try:
            self.replay = self.schedule.start(ReplayPlan.from_message(plan))
        except UsageError as e:  # checked by the master already: only a log changed since
            raise RuntimeError(f"llmchaos replay: {e}") from None

    def _share_done(self) -> None:
        if self.is_worker:
            self.env.runner.send_message(DONE_MSG, None)  # type: ignore[union-attr]  # a worker has its runner
        else:
            self.local_done = True

    def _worker_done(self, msg: Message, **_: object) -> None:
        self.workers_done.add(msg.node_id)

    def finished(self) -> bool:
        """Every request of the log has been sent and has ended (on every worker)."""
        if self.is_master:
            clients = {c.id for c in self.env.runner.clients.values()}  # type: ignore[union-attr]  # is_master
            return bool(clients) and self.workers_done >= clients
        return self.local_done

    def stop_arrivals(self) -> None:
        """Stop issuing; requests due but never sent count as cancelled at stop on their side(s)."""
        self.workers_done.clear()
        for due in self.schedule.stop():
            for side in due.sides:
                rec = self._record(due, side, "")
                rec.sent, rec.outcome, rec.error, rec.at_stop = (
                    time.time(),
                    "cancelled",
                    "never sent: test stopped",
                    True,
                )
                self.collector.add(rec)

    # -- one request ----------------------------------------------------------------------------
    def replay_next(self, user: ReplayUser) -> None:
        """Send the next request due to its side, or to both (mirrored): each side from a greenlet of
        its own, started one right after the other, so the second send waits only for the first."""
        due = self.schedule.next()
        recs: dict[str, RequestRecord] = {}
        rid = uuid.uuid4().hex
        try:
            if len(due.sides) == 1:
                self._send(user, due, due.sides[0], rid, recs)
            else:
                sends = [gevent.spawn(self._send, user, due, side, rid, recs) for side in due.sides]
                try:
                    gevent.joinall(sends)
                finally:
                    gevent.killall(sends)  # only when this user was stopped: the test is ending
        finally:
            self.schedule.done(due)
            self._record_all(due, recs)

    def _record(self, due: Due, side: str, rid: str) -> RequestRecord:
        assert self.replay is not None
        rec = RequestRecord(
            due.lang, due.api, self.replay.targets[side], self.phase(due.intended), rid, True, due.intended
        )
        rec.replay = ReplayFields(due.rec.line, due.rec.user, due.rec.session, due.loop, due.requested)
        return rec

    def _send(self, user: ReplayUser, due: Due, side: str, rid: str, recs: dict[str, RequestRecord]) -> None:
        assert self.replay is not None
        recs[side] = rec = self._record(due, side, rid)
        call = Call(due.call.path, {**due.call.headers, REQUEST_ID_HEADER: rid}, due.call.body)
        now_unix, now_perf = time.time(), time.perf_counter()
        stream = not self.replay.options["no_stream"]
        user.clients[side].run(ADAPTERS[due.api], call, stream, rec, now_perf - (now_unix - due.intended))

    def _record_all(self, due: Due, recs: dict[str, RequestRecord]) -> None:
        """Count, hash, pair and add the request's records (adding never yields: count first)."""
        for rec in recs.values():
            rec.at_stop = rec.outcome == "cancelled" and self.stopping
            rec.count_tokens()
            if rec.replay is not None and rec.chunks:
                rec.replay.text_sha256 = hashlib.sha256(rec.text.encode()).hexdigest()[:16]
        if len(recs) == 2 and all(r.outcome == "ok" and r.replay is not None for r in recs.values()):
            a, b = recs["a"], recs["b"]
            same = a.replay.text_sha256 == b.replay.text_sha256  # type: ignore[union-attr]  # checked above
            for mine, peer in ((a, b), (b, a)):
                mine.replay.peer_output_tokens, mine.replay.identical = peer.output_tokens, same  # type: ignore[union-attr]
            self.stats.pair(due.lang, same, a, b)
        for side, rec in recs.items():
            self.collector.add(rec)
            self._locust_stats(rec)
            if not rec.at_stop:
                self.stats.done(side, rec, due.requested)

    def stats_name(self, rec: RequestRecord) -> str:
        sides = {url: side for side, url in (self.replay.targets.items() if self.replay else ())}
        return f"{sides[rec.target]} {rec.lang}" if len(sides) > 1 else rec.lang

    # -- results --------------------------------------------------------------------------------
    def new_report(self, exporter: Exporter) -> Report:
        assert self.replay is not None
        return ReplayReport(
            self.settings,
            self.replay,
            ReplayStats(self.replay.source.path) if self.is_master else self.stats,
            exporter,
            None if self.is_master else self.collector,
            self.faults.active if self.faults else None,
        )

    def report_data(self, streaming: bool) -> dict[str, Any]:
        return {**super().report_data(streaming), "replay": self.stats.drain()}
