"""The simulated board's energy: a profile's power model (reference_server/profile.py's `Power`)
integrated over the monotonic clock, in millijoules since the server started."""

from __future__ import annotations

from reference_server.profile import Power


class PowerMeter:
    """A board that idles at the model's idle power but while a step runs: `run` says from when to when,
    its tokens and its clock (a clock change in the middle of a step runs the rest anew from that
    moment). Readings at any time agree with the ones after them: the energy never falls, however late
    a step is recorded."""

    def __init__(self, model: Power, now: float) -> None:
        self.model = model
        self._mj = 0.0  # up to `_since`
        self._since = now
        self._watts, self._until = model.idle_w, now  # the step from `_since` to `_until`; idle after it

    def run(self, tokens: int, clock_ratio: float, start: float, end: float) -> None:
        """A step of `tokens` at `clock_ratio` (locked / max clock) from `start` (or from the last
        change, if that is later) until `end`."""
        start = max(start, self._since)
        self._mj, self._since = self.energy_mj(start), start
        self._watts, self._until = self.model.step_w(tokens, clock_ratio), max(end, start)

    def energy_mj(self, now: float) -> float:
        busy = max(0.0, min(now, self._until) - self._since)
        idle = max(0.0, now - max(self._until, self._since))
        return self._mj + 1000.0 * (self._watts * busy + self.model.idle_w * idle)

    def power_w(self, now: float) -> float:
        return self._watts if self._since <= now < self._until else self.model.idle_w
