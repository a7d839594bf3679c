"""A fault host's clock offset from the master's, estimated from each lease and its ack the way NTP
does it (RFC 5905's on-wire arithmetic): with t1 the lease's sending and t4 the ack's receipt (the
master's clock), t2 the lease's receipt and t3 the ack's sending (the host's),

    offset = ((t2 - t1) + (t3 - t4)) / 2      delay = (t4 - t1) - (t3 - t2)

and the true offset lies within offset +- delay / 2 whatever the two one-way delays were. The
estimate is the sample of least delay among the last FILTER (NTP's clock filter): a round trip that
waited in a busy loop or a queue says little. Host times map to the master's as `t - offset`."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

FILTER = 16


@dataclass(frozen=True)
class Sample:
    offset: float  # host clock minus master clock, seconds
    delay: float  # the round trip less the host's own time on it
    at: float  # t4


class Offset:
    def __init__(self) -> None:
        self.recent: deque[Sample] = deque(maxlen=FILTER)
        self.count = 0
        self.best: Sample | None = None  # the estimate now

    def add(self, t1: float, t2: float, t3: float, t4: float) -> Sample:
        sample = Sample(((t2 - t1) + (t3 - t4)) / 2, max(0.0, (t4 - t1) - (t3 - t2)), t4)
        self.recent.append(sample)
        self.count += 1
        self.best = min(self.recent, key=lambda s: s.delay)
        return sample

    @property
    def offset(self) -> float:
        return self.best.offset if self.best else 0.0

    @property
    def uncertainty(self) -> float | None:
        return self.best.delay / 2 if self.best else None

    def to_master(self, host_time: float) -> float:
        return host_time - self.offset
