"""Load profiles: stages of users (closed loop) or request rate (open loop), from flags or YAML.

A profile is a list of stages `{duration, users?, spawn_rate?, rate?}`; `ramp: true`
interpolates linearly between stages. Shortcuts: `--shape step|ramp|spike|soak
--levels 50,200,500,1000 --stage-duration 30s`.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from llmchaos import yamlfile
from llmchaos.errors import UsageError
from llmchaos.units import duration


@dataclass(frozen=True)
class Stage:
    duration: float
    users: int | None = None
    spawn_rate: float | None = None
    rate: float | None = None


@dataclass(frozen=True)
class Profile:
    stages: tuple[Stage, ...]
    ramp: bool = False

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
    node = yamlfile.compose(path)
    if not isinstance(node, yaml.MappingNode):
        raise UsageError("a profile is a mapping with 'stages'", file=path, line=1)
    top = {k.value: v for k, v in node.value}
    unknown = set(top) - {"stages", "ramp"}
    if unknown:
        k = next(k for k, _ in node.value if k.value in unknown)
        raise UsageError("unknown field", file=path, line=k.start_mark.line + 1, field=k.value)
    stages_node = top.get("stages")
    if not isinstance(stages_node, yaml.SequenceNode) or not stages_node.value:
        raise UsageError("must be a non-empty list", file=path, line=node.start_mark.line + 1, field="stages")
    stages = []
    for i, item in enumerate(stages_node.value):
        line = item.start_mark.line + 1
        if not isinstance(item, yaml.MappingNode):
            raise UsageError("must be a mapping", file=path, line=line, field=f"stages[{i}]")
        raw = {k.value: yamlfile.value(v) for k, v in item.value}
        lines = {k.value: k.start_mark.line + 1 for k, _ in item.value}
        for k in raw:
            if k not in ("duration", "users", "spawn_rate", "rate"):
                raise UsageError("unknown field", file=path, line=lines[k], field=f"stages[{i}].{k}")
        if "duration" not in raw:
            raise UsageError("missing", file=path, line=line, field=f"stages[{i}].duration")
        if ("users" in raw) == ("rate" in raw):
            raise UsageError("give exactly one of users or rate", file=path, line=line, field=f"stages[{i}]")
        numbers: dict[str, float] = {}
        for k in ("users", "spawn_rate", "rate"):
            v = raw.get(k)
            if k not in raw:
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
                raise UsageError(
                    f"must be a positive number, got {v!r}", file=path, line=lines[k], field=f"stages[{i}].{k}"
                )
            numbers[k] = float(v)
        stages.append(
            Stage(
                duration(raw["duration"], f"stages[{i}].duration", path, lines["duration"]),
                int(numbers["users"]) if "users" in numbers else None,
                numbers.get("spawn_rate"),
                numbers.get("rate"),
            )
        )
    kinds = {s.rate is None for s in stages}
    if len(kinds) > 1:
        raise UsageError("mixes users and rate stages", file=path, line=stages_node.start_mark.line + 1, field="stages")
    ramp = top.get("ramp")
    return Profile(tuple(stages), ramp=bool(ramp and yamlfile.value(ramp)))
