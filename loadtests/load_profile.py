"""Load profiles: stages of users (closed loop) or request rate (open loop), from flags or YAML.

A profile is a list of stages `{duration, users?, spawn_rate?, rate?}`; `ramp: true`
interpolates linearly between stages. With --sessions a rate is conversations begun per second,
and a profile's `sessions: {turns, think, tool_rate}` states what --turns, --turn-think and
--tool-rate do, each draw as a distribution (loadtests/distributions.py). Shortcuts: `--shape
step|ramp|spike|soak --levels 50,200,500,1000 --stage-duration 30s`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import yaml

from llmchaos import yamlfile
from llmchaos.errors import UsageError
from llmchaos.units import duration
from loadtests import distributions
from loadtests.distributions import Distribution


@dataclass(frozen=True)
class Stage:
    duration: float
    users: int | None = None
    spawn_rate: float | None = None
    rate: float | None = None


@dataclass(frozen=True)
class Conversations:
    """A profile's `sessions:`: turns per conversation, think time before each later turn and the
    share of turns that offer tools (None: the flag's)."""

    turns: Distribution | None = None
    think: Distribution | None = None
    tool_rate: float | None = None


@dataclass(frozen=True)
class Profile:
    stages: tuple[Stage, ...]
    ramp: bool = False
    sessions: Conversations | None = None

    @property
    def total(self) -> float:
        return sum(s.duration for s in self.stages)

    def at(self, t: float) -> tuple[int, Stage, float]:
        """(index, stage, fraction through it) at `t` seconds from start; index -1 once over."""
        start = 0.0
        for i, s in enumerate(self.stages):
            if t < start + s.duration:
                return i, s, (t - start) / s.duration if s.duration else 1.0
            start += s.duration
        return -1, self.stages[-1], 1.0

    def _value(self, t: float, attr: str) -> float | None:
        i, s, frac = self.at(t)
        if i < 0:
            return None
        v = getattr(s, attr)
        if self.ramp and v is not None:
            prev = getattr(self.stages[i - 1], attr) if i > 0 else 0
            v = (prev or 0) + ((v - (prev or 0)) * frac)
        return v

    def rate(self, t: float) -> float | None:
        return self._value(t, "rate")

    def users(self, t: float) -> int | None:
        v = self._value(t, "users")
        return None if v is None else max(1, round(v))


def shape(kind: str, levels: list[float], stage_duration: float, open_loop: bool) -> Profile:
    """The named shapes: step (levels in turn), ramp (linear between levels), spike (base,
    peak, base), soak (one level held)."""

    def st(v: float, d: float = stage_duration) -> Stage:
        return Stage(d, rate=v) if open_loop else Stage(d, users=int(v))

    if kind == "step":
        return Profile(tuple(st(v) for v in levels))
    if kind == "ramp":
        return Profile(tuple(st(v) for v in levels), ramp=True)
    if kind == "spike":
        if len(levels) != 2:
            raise UsageError("spike takes two levels: base,peak", field="--levels")
        base, peak = levels
        return Profile((st(base), st(peak, stage_duration / 3), st(base)))
    if kind == "soak":
        if len(levels) != 1:
            raise UsageError("soak takes one level", field="--levels")
        return Profile((st(levels[0]),))
    raise UsageError(f"unknown shape {kind!r}", field="--shape")


def load(path: str) -> Profile:
    """Read a YAML profile; every error names the file, line and field."""
    root, r = yamlfile.compose(path), yamlfile.Reader(path)
    top = r.mapping(root, "", "a profile is a mapping with 'stages'")
    for name, (k, _) in top.items():
        if name not in ("stages", "ramp", "sessions"):
            raise r.fail(k, name, "unknown field")
    stages_node = top["stages"][1] if "stages" in top else root
    if not isinstance(stages_node, yaml.SequenceNode) or not stages_node.value:
        raise r.fail(stages_node, "stages", "must be a non-empty list")
    stages = [_stage(r, item, f"stages[{i}]") for i, item in enumerate(stages_node.value)]
    if len({s.rate is None for s in stages}) > 1:
        raise r.fail(stages_node, "stages", "mixes users and rate stages")
    ramp = r.value(top["ramp"][1], "ramp") if "ramp" in top else False
    if not isinstance(ramp, bool):
        raise r.fail(top["ramp"][1], "ramp", f"must be true or false, got {ramp!r}")
    return Profile(tuple(stages), ramp, _conversations(r, top["sessions"][1]) if "sessions" in top else None)


def _conversations(r: yamlfile.Reader, node: yaml.Node) -> Conversations:
    fields = r.mapping(node, "sessions")
    for name, (k, _) in fields.items():
        if name not in ("turns", "think", "tool_rate"):
            raise r.fail(k, f"sessions.{name}", "unknown field (turns, think, tool_rate)")
    draws = {
        name: distributions.load(r, fields[name][1], f"sessions.{name}", whole=name == "turns")
        for name in ("turns", "think")
        if name in fields
    }
    rate = None
    if "tool_rate" in fields:
        given = r.value(fields["tool_rate"][1], "sessions.tool_rate")
        if not isinstance(given, (int, float)) or isinstance(given, bool) or not 0 <= given <= 1:
            raise r.fail(fields["tool_rate"][1], "sessions.tool_rate", f"a share, 0 to 1, got {given!r}")
        rate = float(given)
    return Conversations(draws.get("turns"), draws.get("think"), rate)


def _stage(r: yamlfile.Reader, node: yaml.Node, where: str) -> Stage:
    fields = r.mapping(node, where)
    for name, (k, _) in fields.items():
        if name not in ("duration", "users", "spawn_rate", "rate"):
            raise r.fail(k, f"{where}.{name}", "unknown field")
    if "duration" not in fields:
        raise r.fail(node, f"{where}.duration", "missing")
    if ("users" in fields) == ("rate" in fields):
        raise r.fail(node, where, "give exactly one of users or rate")
    numbers: dict[str, float] = {}
    for name in ("users", "spawn_rate", "rate"):
        if name in fields:
            v = r.value(fields[name][1], f"{where}.{name}")
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise r.fail(fields[name][0], f"{where}.{name}", f"must be a positive number, got {v!r}")
            numbers[name] = float(v)
    k, v = fields["duration"]
    seconds = duration(r.value(v, f"{where}.duration"), f"{where}.duration", r.path, yamlfile.line(k))
    if not math.isfinite(seconds):
        raise r.fail(k, f"{where}.duration", "must be finite")
    users = numbers.get("users")
    return Stage(seconds, None if users is None else int(users), numbers.get("spawn_rate"), numbers.get("rate"))
