"""The master's ledger: requests are labelled by what a fault host acknowledged (mapped to the
master's clock), a stretch it could not know is NAME:unconfirmed, never baseline, and a decided
stretch never changes."""

import pytest

from faults.host import ledger as lg
from faults.host.messages import Ack, Joules, Record
from faults.timeline import PhaseUpdate
from tests.unit.faults.schedules import load

SCHEDULE = """faults:
  - name: slow
    kind: gpu_clock
    target: {host: gpu-1, sim: "http://127.0.0.1:8000"}
    at: 10s
    duration: 10s
    params: {graphics_mhz: 660}
"""
T0 = 1000.0


class Host:
    """Drives a ledger as the master's loop and one fault host would, the host `skew` s ahead."""

    def __init__(self, ledger: lg.Ledger, skew: float = 0.0) -> None:
        self.ledger, self.skew, self.seq, self.boot = ledger, skew, 0, "b1"
        self.spans: list[list[float | None]] = []
        ledger.hosts["gpu-1"].boot = self.boot

    def lease(
        self, t1: float, apply_at: float | None = None, revert_at: float | None = None, mj: float | None = None
    ) -> None:
        """A lease sent at t1 (master's clock) and its ack 2 ms later; the host applies or reverts at
        the given master times (before answering)."""
        self.ledger.desired("gpu-1", t1)
        self.seq += 1
        self.ledger.hosts["gpu-1"].sent[self.seq] = t1
        if apply_at is not None:
            self.spans.append([apply_at + self.skew, None])
        if revert_at is not None:
            self.spans[-1][1] = revert_at + self.skew
        records = [Record("slow#0", "slow", [list(s) for s in self.spans])] if self.spans else []
        read = [Joules("GPU-a", t1 + 0.001 + self.skew, mj)] if mj is not None else []
        ack = Ack(self.boot, "s", self.seq, t1, t1 + 0.001 + self.skew, t1 + 0.001 + self.skew, records, energy=read)
        self.ledger.ack("gpu-1", ack, t1 + 0.002)


def ledger(tmp_path, hold: float = 3.0) -> lg.Ledger:
    led = lg.Ledger(load(tmp_path, SCHEDULE), 3600, lease_s=3.0, hold_s=hold)
    led.begin(T0, T0)
    return led


@pytest.mark.parametrize("skew", [0.0, 5.0, -2.5])
def test_phases_follow_the_acknowledged_apply_and_revert_on_the_masters_clock(tmp_path, skew):
    led = ledger(tmp_path)
    host = Host(led, skew)
    for t in range(1001, 1010):
        host.lease(float(t))
    host.lease(1010.0, apply_at=1010.05)  # 50 ms late: before it, the truth is baseline
    for t in range(1011, 1020):
        host.lease(float(t))
    host.lease(1020.0, revert_at=1020.02)
    host.lease(1021.0)
    led.advance(1021.1)
    assert led.phases.settled == pytest.approx(1021.1)  # ended, nothing held: known up to now
    assert led.phases.labels(1010.04) == ()
    assert led.phases.labels(1010.06) == ("slow",)
    assert led.phases.labels(1020.01) == ("slow",)
    assert led.phases.labels(1020.03) == ()
    (w,) = lg.timeline(led)
    assert w.actual_start == pytest.approx(1010.05)
    assert w.actual_end == pytest.approx(1020.02)
    assert (w.unconfirmed, w.error, w.host) == ([], None, "gpu-1")
    assert w.target == {"sim": "http://127.0.0.1:8000", "host": "gpu-1"}
    assert w.apply_ack_lag_s == pytest.approx(0.002)
    (h,) = lg.hosts(led)
    assert h.offset_s == pytest.approx(skew)
    assert h.uncertainty_s == pytest.approx(0.001)


def test_nothing_is_decided_beyond_what_the_host_answered_until_the_hold_is_up(tmp_path):
    led = ledger(tmp_path, hold=3.0)
    host = Host(led)
    host.lease(1010.0, apply_at=1010.01)
    host.lease(1011.0)
    led.advance(1012.9)
    assert led.phases.settled == pytest.approx(1011.0)  # the host's state after its last answer is open
    assert led.phases.labels(1010.5) == ("slow",)


def test_lost_contact_is_unconfirmed_never_baseline_and_stays_so(tmp_path):
    led = ledger(tmp_path, hold=3.0)
    host = Host(led)
    host.lease(1010.0, apply_at=1010.01)
    host.lease(1013.0)
    led.advance(1017.0)  # no answer since 1013: decided up to 1014, unconfirmed after 1013
    assert led.phases.labels(1012.0) == ("slow",)
    assert led.phases.labels(1013.5) == ("slow:unconfirmed",)
    assert led.hosts["gpu-1"].lost == [[pytest.approx(1013.002), None]]
    led.advance(1030.0)
    assert led.phases.labels(1025.0) == ("slow:unconfirmed",)  # it held the fault: unknown since
    host.lease(1031.0, revert_at=1016.0)  # back: it had reverted by itself at 1016 (its lease ran out)
    led.advance(1031.1)
    assert led.phases.labels(1025.0) == ("slow:unconfirmed",)  # decided stretches never change
    assert led.phases.labels(1030.5) == ()  # what is known now: reverted long since
    (w,) = lg.timeline(led)
    assert w.actual_end == pytest.approx(1016.0)
    assert w.unconfirmed == [(pytest.approx(1013.0), pytest.approx(1027.0))]
    assert led.hosts["gpu-1"].lost == [[pytest.approx(1013.002), pytest.approx(1031.002)]]


def test_a_window_never_acknowledged_is_unconfirmed_while_due_and_baseline_before(tmp_path):
    led = ledger(tmp_path, hold=3.0)
    led.advance(1005.0)
    led.desired("gpu-1", 1010.0)  # leased, never answered
    led.advance(1040.0, final=True)
    assert led.phases.labels(1008.0) == ()
    assert led.phases.labels(1015.0) == ("slow:unconfirmed",)
    assert led.phases.labels(1020.5) == ("slow:unconfirmed",)  # it could have held it its lateness longer
    assert led.phases.labels(1021.5) == ()
    (w,) = lg.timeline(led)
    assert w.error == "never acknowledged: the host never said it applied it"
    assert w.unconfirmed == [(1010.0, 1021.0)]


def test_a_restarted_host_ends_its_last_runs_window_unseen_and_applies_it_again(tmp_path):
    led = ledger(tmp_path, hold=10.0)
    host = Host(led)
    host.lease(1010.0, apply_at=1010.01)
    host.lease(1012.0)
    w = led.windows["slow#0"]
    w.restarted(led.hosts["gpu-1"], 1014.0)  # a new run said hello at 1014
    host.boot, host.spans = "b2", []
    led.hosts["gpu-1"].boot = "b2"
    host.lease(1015.0, apply_at=1015.01)
    host.lease(1016.0)
    led.advance(1016.1)
    assert led.phases.labels(1011.0) == ("slow",)
    assert led.phases.labels(1013.0) == ("slow:unconfirmed",)  # between its last answer and the new run
    assert led.phases.labels(1014.5) == ()  # the new run swept before it said hello: nothing applied
    assert led.phases.labels(1015.5) == ("slow",)
    (t,) = lg.timeline(led)
    assert t.spans == [(pytest.approx(1010.01), pytest.approx(1012.0)), (pytest.approx(1015.01), None)]
    assert t.unconfirmed == [(1012.0, 1014.0)]


def test_segments_do_not_overlap_and_carry_every_label():
    pieces = [(0.0, 10.0, "a"), (5.0, 15.0, "b"), (12.0, 20.0, "a")]
    assert lg._flatten(pieces) == [
        lg.Segment(0.0, 5.0, ("a",)),
        lg.Segment(5.0, 10.0, ("a", "b")),
        lg.Segment(10.0, 12.0, ("b",)),
        lg.Segment(12.0, 15.0, ("a", "b")),
        lg.Segment(15.0, 20.0, ("a",)),
    ]
    phases = lg.Phases()
    phases.absorb(PhaseUpdate([[s.start, s.end, list(s.labels)] for s in lg._flatten(pieces)], 20.0))
    assert (phases.labels(4.9), phases.labels(5.0), phases.labels(20.0)) == (("a",), ("a", "b"), ())


def test_a_window_is_leased_ahead_of_its_start_and_the_loop_wakes_for_it(tmp_path):
    led = ledger(tmp_path)
    assert led.next_edge(1005.0) == pytest.approx(T0 + 10 - lg.LEAD_S)
    assert led.desired("gpu-1", 1009.0) == []
    (ahead,) = led.desired("gpu-1", 1009.6)
    assert (ahead.id, ahead.starts_in, ahead.expires_in, ahead.ends) == ("slow#0", pytest.approx(0.4), 3.0, False)
    assert led.next_edge(1009.6) == pytest.approx(1010.0)
    (last,) = led.desired("gpu-1", 1018.0)
    assert (last.starts_in, last.expires_in, last.ends) == (0.0, pytest.approx(2.0), True)


@pytest.mark.parametrize("skew", [0.0, 5.0, -2.5])
def test_a_hosts_energy_readings_are_put_on_the_masters_clock(tmp_path, skew):
    led = ledger(tmp_path)
    assert led.energy("gpu-1") == ({}, "fault host gpu-1 never acknowledged a lease")
    host = Host(led, skew)
    for k, t in enumerate(range(1001, 1004)):
        host.lease(float(t), mj=1000.0 * k)
    series, why = led.energy("gpu-1")
    assert why is None
    assert series["GPU-a"] == [(pytest.approx(t + 0.001), 1000.0 * k) for k, t in enumerate(range(1001, 1004))]
