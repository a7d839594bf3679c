"""The replay's schedule served on the wall clock: sessions in order when strict, the log's time after
the turn before's end too when after-end, at their offsets when timed, what fell due unsent handed
back at stop, the user idle last takes the next request (the schedule's offsets, windows and shares:
tests/unit/loadtests/replay/test_dispatch.py)."""

import json
import time

import gevent
import pytest

from loadtests.replay.dispatch import ReplayPlan, ReplaySchedule, block, sleep_until
from loadtests.replay.fidelity import ReplayStats
from tests.unit.loadtests.replay import test_dispatch as unit

log = unit.log  # the fixture: twenty requests one second apart
settings = unit.settings


def run_schedule(log, *argv):
    """Serve the schedule with one taker that holds each request 0.15 s; the order of what happened."""
    s = settings(log, "--speed", "200", "--end", "4s", *argv)
    events: list[tuple[str, int, bool | None]] = []
    finished: list[bool] = []
    sched = ReplaySchedule(ReplayStats(), lambda: finished.append(True))
    sched.start(ReplayPlan(time.time() + 0.02, 0, 1, s.options))

    def taker():
        while True:
            due = sched.next()
            events.append(("start", due.rec.line, due.intended <= time.time()))
            gevent.sleep(0.15)
            events.append(("end", due.rec.line, None))
            sched.done(due)

    workers = [gevent.spawn(taker) for _ in range(4)]
    gevent.sleep(1.0)
    gevent.killall(workers)
    return events, finished, sched


@pytest.mark.timing
def test_strict_sessions_wait_for_the_turn_before(log):
    events, finished, sched = run_schedule(log)
    order = [(what, line) for what, line, _ in events]
    for first, second in ((1, 2), (3, 4)):  # two turns of sessions s0 and s1, 5 ms apart in the replay
        assert order.index(("end", first)) < order.index(("start", second))
    assert all(on_time for what, _, on_time in events if what == "start")
    assert sched.stats.held == 2
    assert finished == [True]
    assert sched.stop() == []


@pytest.mark.timing
def test_timed_sessions_go_at_their_offsets(log):
    events, finished, _ = run_schedule(log, "--session-order", "timed")
    order = [(what, line) for what, line, _ in events]
    assert order.index(("start", 2)) < order.index(("end", 1))  # the second turn did not wait
    assert finished == [True]


@pytest.mark.timing
@pytest.mark.parametrize("busy", [0.0, 0.1], ids=["idle", "busy"])
def test_after_end_sessions_wait_the_logs_time_after_the_turn_before_ended(tmp_path, busy):
    """Session x's second turn is 2 s after its first in the log, session y's 10 s (0.2 s and 1 s at
    --speed 10); each turn takes 0.3 s. x's second is held while the first is in flight, then waits
    0.2 s after its end (strict would send it at the end, timed at 0.2 s); y's first has long ended
    when its second falls due at 1 s, which waits until 0.3 s + 1 s. Busy: a turn's end comes after
    the process ran `busy` s without yielding (libev's loop then dates a timer from its last look at
    the clock, that long ago): the wait after it is still whole."""
    p = tmp_path / "log.jsonl"
    rows = [(100, "x"), (100, "y"), (102, "x"), (110, "y")]
    p.write_text(
        "".join(
            json.dumps({"ts": t, "user_id": k, "session_id": k, "input_tokens": 8, "output_tokens": 2}) + "\n"
            for t, k in rows
        )
    )
    s = settings(p, "--speed", "10", "--session-order", "after-end")
    seen: dict[tuple[str, int], float] = {}
    sent: dict[int, float] = {}
    finished: list[bool] = []
    sched = ReplaySchedule(ReplayStats(), lambda: finished.append(True))
    t0 = time.time() + 0.02
    sched.start(ReplayPlan(t0, 0, 1, s.options))

    def taker():
        while True:
            due = sched.next()
            seen["start", due.rec.line], sent[due.rec.line] = time.time() - t0, due.intended - t0
            gevent.sleep(0.3)
            block(busy)
            seen["end", due.rec.line] = time.time() - t0
            sched.done(due)

    workers = [gevent.spawn(taker) for _ in range(4)]
    gevent.sleep(2.0)
    gevent.killall(workers)
    assert finished == [True]
    for first, second, after in ((1, 3, 0.2), (2, 4, 1.0)):
        assert seen["start", second] >= seen["end", first] + after - 0.002, (first, seen)
        assert sent[second] >= seen["end", first] + after - 0.002  # its due time, as its record has it
        assert sent[second] == pytest.approx(seen["start", second], abs=0.05)
    assert sched.stop() == []


def test_stop_hands_back_what_fell_due_unsent(log):
    s = settings(log, "--speed", "200", "--end", "4s")
    sched = ReplaySchedule(ReplayStats(), lambda: None)
    sched.start(ReplayPlan(time.time(), 0, 1, s.options))
    gevent.sleep(0.2)  # every request falls due, none is taken
    unsent = sched.stop()
    assert sorted(d.rec.line for d in unsent) == [1, 2, 3, 4]  # turns held for their session included


@pytest.mark.timing
def test_sleep_until_returns_at_its_time_with_other_greenlets_running():
    ran: list[float] = []
    for k in range(20):
        due = time.time() + 0.0005 * (k % 5)  # due now, or within the last 2 ms libev cannot time
        g = gevent.spawn(lambda: ran.append(time.time()))  # ready: runs before sleep_until blocks
        sleep_until(due)
        assert time.time() >= due
        assert g.dead
    assert len(ran) == 20
    ticks = []

    def other():
        while True:
            ticks.append(time.time())
            gevent.sleep(0)

    g = gevent.spawn(other)
    try:
        due = time.time() + 0.002
        sleep_until(due)
    finally:
        g.kill()
    assert len([t for t in ticks if t < due]) > 1  # it kept running between the naps


@pytest.mark.timing
def test_the_user_idle_last_takes_the_next_request(tmp_path):
    """Requests 20 ms apart, each over in 1 ms: one user (of four) takes them all, its connection
    kept warm, the others' left to idle; one taken while another runs goes to another user."""
    p = tmp_path / "spaced.jsonl"
    rows = [{"ts": i * 0.02, "user_id": f"u{i}", "input_tokens": 8} for i in range(10)]
    rows.append({"ts": 0.181, "user_id": "late", "input_tokens": 8})  # due while line 10 is taken
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sched = ReplaySchedule(ReplayStats(), lambda: None)
    sched.start(ReplayPlan(time.time() + 0.02, 0, 1, settings(p).options))
    taken: dict[int, str] = {}

    def taker(name: str, hold: float) -> None:
        while True:
            due = sched.next()
            taken[due.rec.line] = name
            gevent.sleep(hold if due.rec.line == 10 else 0.001)
            sched.done(due)

    users = [gevent.spawn(taker, f"t{k}", 0.01) for k in range(4)]
    gevent.sleep(0.4)
    gevent.killall(users)
    assert len(taken) == 11
    assert len({taken[line] for line in range(1, 11)}) == 1
    assert taken[11] != taken[10]
    assert sched.finished


def test_stop_hands_back_what_fell_due_while_the_builds_lagged(tmp_path):
    # defect 17 of issue 34: a log of 2M-token prompts 100 ms apart had 35 of 100 requests due before
    # the stop neither sent nor counted; everything due by the stop is handed back, built or not
    path = tmp_path / "long.jsonl"
    lines = [{"ts": 0.05 * i, "user_id": f"u{i}", "input_tokens": 2_000_000, "output_tokens": 2} for i in range(40)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    stats = ReplayStats()
    sched = ReplaySchedule(stats, lambda: None)
    t0 = time.time() + 0.02
    sched.start(ReplayPlan(t0, 0, 1, settings(path).options))
    gevent.sleep(1.0)  # about twenty fall due, far fewer are built by then; none is taken
    stopped = time.time()
    unsent = sched.stop()
    due = [i + 1 for i in range(len(lines)) if t0 + 0.05 * i <= stopped]
    assert sorted(d.rec.line for d in unsent) == due
    assert any(d.call is None for d in unsent), "the builds kept up: no lag to account for"
    assert sum(n for (_, _, what), n in stats.minutes.items() if what == "recorded") == len(due)
    assert sched.stop() == []
