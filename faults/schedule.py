"""Fault schedules (YAML): validated whole before anything runs, every error with file, line and field.

```yaml
seed: 7
faults:
  - name: chunk-drop            # unique; becomes the phase label
    kind: sse                   # one of the injectors in faults/
    target: {proxy: "127.0.0.1:9100"}
    at: 2m                      # offset from the start
    duration: 30s
    every: 5m                   # optional repeat
    params: {drop_ratio: 0.15}
```
Two windows of one kind on one target never overlap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from llmchaos import yamlfile
from llmchaos.errors import UsageError
from llmchaos.units import duration

if TYPE_CHECKING:
    from faults.injectors.base import Injector

FIELDS = {"name", "kind", "target", "at", "duration", "every", "params"}
HORIZON_S = 24 * 3600.0  # overlap of repeating windows is checked this far ahead


@dataclass(frozen=True)
class FaultSpec:
    name: str
    kind: str
    target: dict
    at: float
    duration: float
    every: float | None
    params: dict
    line: int
    target_line: int

    @property
    def target_key(self) -> str:
        return json.dumps(self.target, sort_keys=True)


@dataclass(frozen=True)
class Window:
    name: str
    kind: str
    target: dict
    params: dict
    start: float  # seconds from the schedule's start
    end: float


@dataclass
class Schedule:
    seed: int
    faults: list[FaultSpec] = field(default_factory=list)

    def windows(self, horizon: float = HORIZON_S) -> list[Window]:
        """Every window that starts before `horizon` seconds, in start order."""
        out = []
        for f in self.faults:
            start = f.at
            while start < horizon:
                out.append(Window(f.name, f.kind, f.target, f.params, start, start + f.duration))
                if f.every is None:
                    break
                start += f.every
        return sorted(out, key=lambda w: (w.start, w.name))


def load(path: str, kinds: dict[str, type[Injector]]) -> Schedule:
    """Parse and validate; `kinds` maps each kind to its injector (which checks target and params)."""
    root = yamlfile.compose(path)

    def fail(node: yaml.Node, field_: str, message: str) -> UsageError:
        return UsageError(message, file=path, line=yamlfile.line(node), field=field_)

    if not isinstance(root, yaml.MappingNode):
        raise fail(root, "", "a schedule is a mapping with 'faults'")
    top = {k.value: (k, v) for k, v in root.value}
    for name, (k, _) in top.items():
        if name not in ("seed", "faults"):
            raise fail(k, name, "unknown field")
    seed = yamlfile.value(top["seed"][1]) if "seed" in top else 0
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise fail(top["seed"][1], "seed", "must be an integer")
    if "faults" not in top or not isinstance(top["faults"][1], yaml.SequenceNode):
        raise fail(root, "faults", "must be a list of faults")
    specs: list[FaultSpec] = []
    for i, node in enumerate(top["faults"][1].value):
        where = f"faults[{i}]"
        if not isinstance(node, yaml.MappingNode):
            raise fail(node, where, "must be a mapping")
        items = {k.value: (k, v) for k, v in node.value}
        for name, (k, _) in items.items():
            if name not in FIELDS:
                raise fail(k, f"{where}.{name}", "unknown field")
        for name in ("name", "kind", "target", "at", "duration"):
            if name not in items:
                raise fail(node, f"{where}.{name}", "missing")
        spec_name = yamlfile.value(items["name"][1])
        kind = yamlfile.value(items["kind"][1])
        if kind not in kinds:
            raise fail(items["kind"][1], f"{where}.kind", f"unknown kind {kind!r} (one of {', '.join(sorted(kinds))})")
        target = yamlfile.value(items["target"][1])
        params = yamlfile.value(items["params"][1]) if "params" in items else {}
        if not isinstance(target, dict) or not target:
            raise fail(items["target"][1], f"{where}.target", "must be a non-empty mapping")
        if not isinstance(params, dict):
            raise fail(items["params"][1], f"{where}.params", "must be a mapping")
        at, length = _seconds(items, "at", where, path), _seconds(items, "duration", where, path)
        every = _seconds(items, "every", where, path) if "every" in items else None
        if length <= 0:
            raise fail(items["duration"][1], f"{where}.duration", "must be positive")
        if every is not None and every < length:
            raise fail(items["every"][1], f"{where}.every", "must be at least the duration (windows would overlap)")
        try:
            kinds[kind].check(target, params)
        except ValueError as e:
            bad = getattr(e, "field", "params")
            at_node = items[bad.split(".")[0]][1] if bad.split(".")[0] in items else node
            raise fail(at_node, f"{where}.{bad}", str(e)) from None
        if any(s.name == spec_name for s in specs):
            raise fail(items["name"][1], f"{where}.name", f"duplicate name {spec_name!r}")
        specs.append(
            FaultSpec(
                str(spec_name),
                kind,
                target,
                at,
                length,
                every,
                params,
                yamlfile.line(node),
                yamlfile.line(items["target"][1]),
            )
        )
    schedule = Schedule(seed, specs)
    _check_overlaps(schedule, path)
    return schedule


def _seconds(items: dict[str, tuple[yaml.Node, yaml.Node]], name: str, where: str, path: str) -> float:
    """The duration field `name` of the fault at `where`, in seconds (UsageError naming its line)."""
    _, v = items[name]
    return duration(yamlfile.value(v), f"{where}.{name}", path, yamlfile.line(v))


def _check_overlaps(schedule: Schedule, path: str) -> None:
    last: dict[tuple[str, str], Window] = {}
    by_name = {f.name: f for f in schedule.faults}
    for w in schedule.windows():
        key = (w.kind, json.dumps(w.target, sort_keys=True))
        prev = last.get(key)
        if prev is not None and w.start < prev.end and prev.name != w.name:
            spec = by_name[w.name]
            raise UsageError(
                f"overlaps {prev.name!r} ({w.kind} on the same target) at {w.start:g}s",
                file=path,
                line=spec.line,
                field=f"faults[{schedule.faults.index(spec)}]",
            )
        if prev is None or w.end > prev.end:
            last[key] = w
