"""The simulated board's energy: a profile's power model (reference_server/profile.py's `Power`)
integrated over the monotonic clock, in millijoules since the server started, and its power as NVML
reports an H100's (Ampere and newer but GA100): the average over the last second."""

from __future__ import annotations

from collections import deque

from reference_server.profile import Power

WINDOW_S = 1.0  # what a power reading averages over


class PowerMeter:
    """A board that idles at the model's idle power but while a step runs: `run` says from when to when,
    its tokens and its clock (a clock change in the middle of a step runs the rest anew from that
    moment). Readings of the energy at any time agree with the ones after them: it never falls, however
    late a step is recorded (the engine records one when it runs it, up to CATCH_UP_S after its start)."""

    def __init__(self, model: Power, now: float) -> None:
        self.model, self._born = model, now
        # (since, energy then in mJ, watts from then until `until`; idle after it), back WINDOW_S at least
        self._runs: deque[tuple[float, float, float, float]] = deque([(now, 0.0, model.idle_w, now)])

    def run(self, tokens: int, clock_ratio: float, start: float, end: float) -> None:
        """A step of `tokens` at `clock_ratio` (locked / max clock) from `start` (or from the last
        change, if that is later) until `end`."""
        start = max(start, self._runs[-1][0])
        self._runs.append((start, self.energy_mj(start), self.model.step_w(tokens, clock_ratio), max(end, start)))
        while self._runs[1][0] <= start - WINDOW_S:
            self._runs.popleft()

    def energy_mj(self, now: float) -> float:
        since, mj, watts, until = next((r for r in reversed(self._runs) if r[0] <= now), self._runs[0])
        busy = max(0.0, min(now, until) - since)
        idle = max(0.0, now - max(until, since))
        return mj + 1000.0 * (watts * busy + self.model.idle_w * idle)

    def power_w(self, now: float) -> float:
        """The average power over the last WINDOW_S (since the start, in the first)."""
        then = max(now - WINDOW_S, self._born)
        if now <= then:
            return self.model.idle_w
        return (self.energy_mj(now) - self.energy_mj(then)) / 1000.0 / (now - then)
