"""The replay's open loop: the log's own schedule, computed alike by every process from the log.

The master sends each worker a plan at test start (the schedule's start, the worker's index, the
options it needs: the plan can arrive before Locust's spawn message). Each worker streams the log,
keeps the window, the sampled users and its own sessions (every turn of a session on one worker),
and queues each request at its recorded offset, sped up; a user takes the next one and sends it.
With `--session-order strict` a session's turn is held until the turn before it has ended; with
`after-end` also for the time the log has from that turn's end to its start (`LogRecord.after`, sped
up), so a turn slowed by a fault delays the conversation's next ones as it would a user's. Neither
sends a turn before its own time in the log, which the dispatcher reads in time order.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, cast

import gevent
from gevent import monkey
from gevent.event import AsyncResult

from llmchaos import languages
from llmchaos.run import ReplayFields
from loadtests.adapters import ADAPTERS, Call
from loadtests.logs import sized_prompts, split
from loadtests.logs.log_record import LogRecord
from loadtests.logs.problems import Problems
from loadtests.replay.ahead import Ahead
from loadtests.replay.calls import asking, build
from loadtests.replay.fidelity import ReplayStats
from loadtests.replay.settings import Carried, ReplaySettings
from loadtests.sources import Due

# libev waits on epoll in whole milliseconds, rounded up: a sleep ends up to 1 ms late. The schedule
# sleeps until EARLY before a request is due, then in short blocking naps, letting the greenlets
# that are ready run between them (a spin would burn the core the generator measures itself by).
EARLY, NAP = 0.0015, 0.0002
ENDED = 1 << 16  # sessions whose last turn's end is kept for their next (after-end)
block = monkey.get_original("time", "sleep")  # Locust patched time.sleep into gevent's


@dataclass(frozen=True)
class ReplayPlan:
    """What the master sends a worker at test start (a single process makes its own)."""

    t0: float  # unix time of the window's start
    worker: int
    workers: int
    options: Carried

    def message(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> ReplayPlan:
        return cls(**{**data, "options": Carried(**data["options"])})


@dataclass(slots=True, kw_only=True)
class LogDue(Due):
    """A request of the log, due at `intended` (unix time), ready to send to its side(s)."""

    rec: LogRecord
    requested: int | None  # output tokens asked for
    session: str | None  # the session whose turns keep their order (None: no order)

    @property
    def size(self) -> int:
        return len(self.call.body) if self.call is not None else 0


Entry = tuple[int, float, LogRecord, str]  # a request of the log: (pass, seconds from the start, record, language)


def timeline(s: ReplaySettings, worker: int = 0, workers: int = 1, problems: Problems | None = None) -> Iterator[Entry]:
    """This worker's share of the replay: (pass, seconds from the start, record, language) in time
    order. The window's records, sped up; each pass after the first starts where the one before
    ended (its span: --end - --start, else to the last record plus the mean gap between records).
    Only the first pass counts the log's skipped lines, into `problems`."""
    origin = 0.0
    for loop in range(s.loop):
        first = last = None
        n = 0
        for rec in s.source.read(problems if loop == 0 and problems is not None else Problems(s.source.path)):
            if rec.offset < s.start:
                continue
            if s.end is not None and rec.offset >= s.end:
                break
            first = rec.offset if first is None else first
            last, n = rec.offset, n + 1
            if not split.sampled(rec.whole, s.sample, s.seed) or split.shard(rec.whole, workers) != worker:
                continue
            lang = rec.lang or s.mix.pick(rec.user, s.seed)
            if s.langs and lang not in s.langs:
                continue
            yield loop, origin + (rec.offset - s.start) / s.speed, rec, lang
        if first is None or last is None:
            return
        span = s.end - s.start if s.end is not None else last - s.start + ((last - first) / (n - 1) if n > 1 else 1.0)
        origin += span / s.speed


def sleep_until(t: float) -> None:
    """Return at unix time `t` (within a tenth of a millisecond on an idle core); the other greenlets
    run meanwhile, those ready when it is called before it blocks at all."""
    gevent.sleep(max(0.0, t - time.time() - EARLY))
    while (rest := t - time.time()) > 0:
        block(min(rest, NAP))  # this whole process: its streams are timed by the kernel's stamps
        gevent.sleep(0)


class ReplaySchedule:
    """This process's share of the replay, queued as it falls due; `on_finished` is called once every
    request of it has been sent and has ended."""

    def __init__(self, stats: ReplayStats, on_finished: Callable[[], None]) -> None:
        self.stats, self.on_finished = stats, on_finished
        self._queue: deque[LogDue] = deque()  # due, waiting for a user
        self._idle: list[AsyncResult] = []  # users waiting for a request, the last to come on top
        self._busy: dict[str, deque[LogDue]] = {}  # sessions with a turn in flight or waiting -> their held turns
        self._ended: OrderedDict[str, float] = OrderedDict()  # after-end: sessions idle since (unix time)
        self._timers: set[gevent.Greenlet] = set()  # after-end: turns waiting for their time after an end
        self._greenlet: gevent.Greenlet | None = None
        self._in_flight = 0
        self._exhausted = self._reported = False
        # what a lagging dispatcher has not released yet, which a stop must still account for: the
        # log's entries not yet built, the one being built, those built and waiting, the one taken
        self._entries: Iterator[Entry] = iter(())
        self._building: Entry | None = None
        self._ahead: Ahead[LogDue] | None = None
        self._taken: LogDue | None = None
        self._plan: tuple[ReplaySettings, ReplayPlan] | None = None

    def start(self, plan: ReplayPlan) -> ReplaySettings:
        """Start dispatching `plan`; the settings it carries."""
        self.stop()
        settings = ReplaySettings.read(plan.options)
        self.stats.t0 = plan.t0
        self._exhausted = self._reported = False
        self._greenlet = gevent.spawn(self._dispatch, settings, plan)
        return settings

    def _dispatch(self, s: ReplaySettings, plan: ReplayPlan) -> None:
        """Each request as it falls due, built ahead of it (`Ahead`)."""
        sized_prompts.warm(languages.tags())  # before the first request is due (the plan comes a second ahead)
        self._plan = (s, plan)
        self._entries = timeline(s, plan.worker, plan.workers, self.stats.problems if plan.worker == 0 else None)
        self._ahead = ahead = Ahead(lambda pause: self._built(s, plan, pause))
        try:
            while (due := ahead.next()) is not None:
                self._taken = due
                assert due.intended is not None
                ahead.until(due.intended)
                sleep_until(due.intended)
                self.stats.due(due.sides, due.intended)
                self._release(due)
                self._taken = None
                gevent.sleep(0)  # the user handed it sends it now, before anything else runs
        finally:
            ahead.stop()
        self._exhausted = True
        self._check_finished()

    def _built(self, s: ReplaySettings, plan: ReplayPlan, pause: Callable[[], None]) -> Iterator[LogDue]:
        """This process's share of the log, each request's call built (`pause` between its parts)."""
        ask = asking(s.options)
        for entry in self._entries:
            self._building = entry
            loop, _, rec, lang = entry
            call = build(rec, lang, ADAPTERS[rec.api or s.options.api], loop, ask, pause)
            self._building = None
            yield self._due(entry, call, call.max_tokens)

    def _due(self, entry: Entry, call: Call | None, requested: int | None) -> LogDue:
        """A log entry as a request (its call None when it was never built: the test stopped first)."""
        assert self._plan is not None
        s, plan = self._plan
        loop, at, rec, lang = entry
        return LogDue(
            lang=lang,
            api=rec.api or s.options.api,
            call=call,
            intended=plan.t0 + at,
            sides=s.sides if s.mode == "mirror" else (split.side(rec.whole, s.split or 0, s.salt),),
            replay=ReplayFields(rec.line, rec.user, rec.session, loop, requested),
            turn=rec.turn,
            rec=rec,
            requested=requested,
            session=rec.session if s.session_order != "timed" else None,
        )

    def _late(self, now: float) -> list[LogDue]:
        """What fell due by `now` and the dispatcher never released, lagging behind its builds: counted
        as due, never sent."""
        late = [self._taken] if self._taken is not None else []
        late += self._ahead.waiting() if self._ahead is not None else []
        pending = [self._building] if self._building is not None else []
        for entry in itertools.chain(pending, self._entries):  # in time order: up to the first not yet due
            due = self._due(entry, None, None)
            if due.intended is not None and due.intended > now:
                break
            late.append(due)
        late = [d for d in late if d.intended is not None and d.intended <= now]
        for d in late:
            self.stats.due(d.sides, d.intended or now)
        return late

    def _release(self, due: LogDue) -> None:
        if due.session is not None:
            held = self._busy.get(due.session)
            if held is not None:
                held.append(due)
                self.stats.held += 1
                return
            self._busy[due.session] = deque()
            ended = self._ended.pop(due.session, None)
            if ended is not None and self._wait(due, ended):
                return
        self._hand(due)

    def _wait(self, due: LogDue, ended: float) -> bool:
        """after-end: hold `due` (its session's first held) until the log's time after `ended`, the
        turn before's end; False when that has passed."""
        assert self._plan is not None
        s, _ = self._plan
        if s.session_order != "after-end" or due.rec.after is None:
            return False
        at = ended + due.rec.after / s.speed
        if at <= time.time():
            return False
        due.intended = max(due.intended or 0.0, at)
        assert due.session is not None
        self._busy[due.session].appendleft(due)
        self._wake_at(due.session, at)
        return True

    def _wake_at(self, session: str, at: float) -> None:
        timer = gevent.spawn_later(at - time.time(), self._wake, session, at)
        self._timers.add(timer)
        timer.link(self._timers.discard)

    def _wake(self, session: str, at: float) -> None:
        """after-end: the session's turn held for its time after the turn before's end goes now (at
        `at`, unix time: libev dates a timer from its loop's last look at the clock, so one set by a
        greenlet that ran long meanwhile fires early, and waits again for the rest)."""
        if at > time.time():
            return self._wake_at(session, at)
        held = self._busy.get(session)
        if held:
            self._hand(held.popleft())

    def _hand(self, due: LogDue) -> None:
        """To the user that became idle last (its connection the warmest: a user idle longer than a
        server's keep-alive would find its connection closed), else into the queue."""
        if self._idle:
            self._idle.pop().set(due)
        else:
            self._queue.append(due)

    def next(self) -> LogDue:
        """Wait for the next request due; `done` must follow once it has ended."""
        if self._queue:
            due = self._queue.popleft()
        else:
            waiter: AsyncResult = AsyncResult()
            self._idle.append(waiter)
            try:
                due = cast(LogDue, waiter.get())  # only _hand sets it
            except BaseException:  # this user was stopped: what it was handed goes to another
                if waiter in self._idle:
                    self._idle.remove(waiter)
                elif waiter.successful():
                    self._queue.appendleft(cast(LogDue, waiter.value))
                raise
        self._in_flight += 1
        return due

    def done(self, due: LogDue) -> None:
        """`due` has ended: its session's next turn may go (not before its own time)."""
        self._in_flight -= 1
        if due.session is not None:
            held, now = self._busy.get(due.session), time.time()
            if held:
                turn = held.popleft()
                turn.intended = max(turn.intended or 0.0, now)
                if not self._wait(turn, now):
                    self._hand(turn)
            else:
                self._busy.pop(due.session, None)
                self._ended[due.session] = now
                if len(self._ended) > ENDED:
                    self._ended.popitem(last=False)
        self._check_finished()

    @property
    def finished(self) -> bool:
        return self._exhausted and not self._in_flight and not self._queue and not self._busy

    def _check_finished(self) -> None:
        if self.finished and not self._reported:
            self._reported = True
            self.on_finished()

    def stop(self) -> list[LogDue]:
        """Stop dispatching; the requests that fell due and were never sent (queued, held, or not yet
        released by a dispatcher behind its schedule)."""
        now = time.time()
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        if self._ahead is not None:
            self._ahead.stop()  # no build goes on with the log's entries now read below
        for timer in list(self._timers):
            timer.kill(block=False)  # its turn stays held, below
        unsent: list[LogDue] = self._late(now) + list(self._queue)
        self._taken = self._building = self._ahead = None
        self._entries = iter(())
        self._queue.clear()
        for held in self._busy.values():
            unsent.extend(held)
        self._busy.clear()
        self._ended.clear()
        return unsent
