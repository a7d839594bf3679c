"""One request as a client of the generator-capacity benchmark measured it, and the server's truth."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from llmchaos.histogram import nearest_rank


@dataclass(frozen=True)
class Measured:
    """Seconds: when it started (unix), TTFT from that start, the gaps between content events."""

    start_unix: float
    ttft: float
    gaps: list[float]

    @classmethod
    def of(cls, start_unix: float, start: float, times: list[float]) -> Measured:
        """From the start and each content event's time on one clock."""
        return cls(start_unix, times[0] - start, [b - a for a, b in itertools.pairwise(times)])

    def received(self) -> list[float]:
        """Each content event's unix time."""
        t = self.start_unix + self.ttft
        out = [t]
        for g in self.gaps:
            t += g
            out.append(t)
        return out


def truth(entry: dict) -> Measured:
    """The server's truth for one request: TTFT from the request's arrival and the gaps between
    the actual sends."""
    sent = [ns / 1e9 for ns in entry["sent_ns"]]
    return Measured.of(entry["wall_ns"] / 1e9, 0.0, sent)


def pct(values: list[float], p: float) -> float:
    return nearest_rank(values, p) if values else float("nan")
