"""The replay's schedule: the log's offsets sped up, a window of it, passes back to back, shares of
workers that add up to the whole with each session on one; sessions in order when strict."""

import json
import time

import configargparse
import gevent
import pytest

from loadtests.replay.dispatch import ReplayPlan, ReplaySchedule, sleep_until, timeline
from loadtests.replay.fidelity import ReplayStats
from loadtests.replay.settings import ReplaySettings, add_replay_arguments


def settings(log, *argv):
    parser = configargparse.ArgumentParser()
    parser.add_argument("--host", default="http://a")
    add_replay_arguments(parser)
    return ReplaySettings.read(parser.parse_args(["--log", str(log), "--lang-mix", "en=1", *argv]))


@pytest.fixture
def log(tmp_path):
    """Twenty requests one second apart; users u0..u4, sessions s0..s9 of two turns each."""
    p = tmp_path / "log.jsonl"
    lines = [
        {"ts": 100 + i, "user_id": f"u{i % 5}", "session_id": f"s{i // 2}", "input_tokens": 8, "output_tokens": 2}
        for i in range(20)
    ]
    p.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return p


def times(s, *share):
    return [(loop, at, rec.line) for loop, at, rec, _ in timeline(s, *share)]


def test_offsets_sped_up_windowed_and_looped(log):
    assert times(settings(log))[:3] == [(0, 0.0, 1), (0, 1.0, 2), (0, 2.0, 3)]
    assert [at for _, at, _ in times(settings(log, "--speed", "4"))][:3] == [0.0, 0.25, 0.5]
    window = times(settings(log, "--start", "5s", "--end", "9s"))
    assert window == [(0, 0.0, 6), (0, 1.0, 7), (0, 2.0, 8), (0, 3.0, 9)]
    looped = times(settings(log, "--loop", "3", "--speed", "2"))
    assert len(looped) == 60
    # each pass starts where the one before ended: 19 s of log and one mean gap (1 s), sped up twice
    assert [at for loop, at, line in looped if line == 1] == [0.0, 10.0, 20.0]
    assert [loop for loop, _, _ in looped] == [0] * 20 + [1] * 20 + [2] * 20
    windowed_loop = times(settings(log, "--start", "5s", "--end", "9s", "--loop", "2"))
    assert [at for _, at, _ in windowed_loop] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


def test_worker_shares_add_up_to_the_whole_with_sessions_kept_whole(log):
    s = settings(log)
    whole = times(s)
    shares = [times(s, w, 3) for w in range(3)]
    assert sorted(x for share in shares for x in share) == whole
    assert all(shares)
    for share in shares:
        lines = {line for _, _, line in share}
        assert all(((line - 1) ^ 1) + 1 in lines for line in lines)  # both turns of each session


def test_sampling_keeps_whole_users_and_languages_filter(log):
    kept = [rec.user for _, _, rec, _ in timeline(settings(log, "--sample", "0.5", "--seed", "3"))]
    users = set(kept)
    assert 0 < len(users) < 5
    assert len(kept) == 4 * len(users)  # every request of a kept user
    mixed = settings(log, "--lang-mix", "en=1,de=1")
    langs = {rec.user: lang for _, _, rec, lang in timeline(mixed)}
    only_de = [rec.user for _, _, rec, _ in timeline(settings(log, "--lang-mix", "en=1,de=1", "--langs", "de"))]
    assert only_de
    assert all(langs[u] == "de" for u in only_de)


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


def test_strict_sessions_wait_for_the_turn_before(log):
    events, finished, sched = run_schedule(log)
    order = [(what, line) for what, line, _ in events]
    for first, second in ((1, 2), (3, 4)):  # two turns of sessions s0 and s1, 5 ms apart in the replay
        assert order.index(("end", first)) < order.index(("start", second))
    assert all(on_time for what, _, on_time in events if what == "start")
    assert sched.stats.held == 2
    assert finished == [True]
    assert sched.stop() == []


def test_timed_sessions_go_at_their_offsets(log):
    events, finished, _ = run_schedule(log, "--session-order", "timed")
    order = [(what, line) for what, line, _ in events]
    assert order.index(("start", 2)) < order.index(("end", 1))  # the second turn did not wait
    assert finished == [True]


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
