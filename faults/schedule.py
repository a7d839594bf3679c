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
A qdisc fault (netem, tbf) may also take `direction` and `match` beside its params
(faults/injectors/aim.py); its injector is given them with the params. `target: {host: NAME, ...}`
runs the window on the fault host of that name (faults/host/), the rest of the target being its
injector's there; no host: the process that runs the schedule. (A docker target's `host` that is a
URL, `unix:///...`, stays the daemon's address, as before.)
Two windows of one kind on one target never overlap (worked out per pair of faults, not by listing
windows; for `replica` and `router` one target is one replica of one router, and a `holding` window,
resolved at run time, may be any of its replicas), and windows are produced lazily, so a fault every
10 ms costs nothing until it runs.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from faults.allow import is_name
from faults.overlap import Train, first_overlap
from llmchaos import yamlfile
from llmchaos.errors import UsageError
from llmchaos.units import YEAR_S, duration

if TYPE_CHECKING:
    from faults.injectors.base import Injector

FIELDS = {"name", "kind", "target", "at", "duration", "every", "params", "direction", "match"}
AIM = ("direction", "match")  # beside params, for the kinds whose injector is `aimed`
HORIZON_S = 24 * 3600.0  # how far a run with no end of its own runs its schedule
MIN_EVERY_S = 0.001


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
    params_line: int
    index: int  # its place in the schedule's list: faults[index]
    direction: str | None = None  # as written: egress | ingress | both (None: not given, egress)
    match: dict | None = None  # as written: {dst, src, dport, sport}, each a value or a list
    lines: dict[str, int] = field(default_factory=dict)  # each field's line (`direction`, `match`, ...)
    host: str | None = None  # the fault host that runs it (target.host); None: the schedule's own process

    @property
    def target_key(self) -> str:
        """The target as the schedule wrote it (its host too), as one string."""
        return json.dumps({**self.target, "host": self.host} if self.host else self.target, sort_keys=True)

    @property
    def applied_params(self) -> dict:
        """What the injector is given (and the journal and the timeline record): the params, with the
        direction and the match beside them when the schedule gives them."""
        aim = {"direction": self.direction, "match": self.match}
        return {**self.params, **{k: v for k, v in aim.items() if v is not None}}

    def starts(self, horizon: float) -> Iterator[float]:
        """This fault's window starts before `horizon`, lazily."""
        k = 0
        while (start := self.at + k * (self.every or 0.0)) < horizon and (k == 0 or self.every):
            yield start
            k += 1

    def count(self, horizon: float) -> int:
        if self.at >= horizon:
            return 0
        return 1 if self.every is None else math.ceil((horizon - self.at) / self.every)

    def covers(self, t: float, horizon: float) -> bool:
        """Whether `t` (seconds from the start) falls in one of this fault's windows."""
        return self.occurrence(t, horizon) is not None

    def occurrence(self, t: float, horizon: float) -> tuple[int, float] | None:
        """(k, start) of this fault's k-th window (from 0) if `t` (seconds from the start) falls in it."""
        if t < self.at:
            return None
        k = math.floor((t - self.at) / self.every) if self.every else 0
        start = self.at + k * (self.every or 0.0)
        return (k, start) if start < horizon and start <= t < start + self.duration else None

    def next_edge(self, t: float, horizon: float) -> float:
        """The first start or end of one of its windows after `t` (inf if none)."""
        if t < self.at:
            return self.at if self.at < horizon else math.inf
        k = math.floor((t - self.at) / self.every) if self.every else 0
        start = self.at + k * (self.every or 0.0)
        if start < horizon and t < start + self.duration:
            return start + self.duration
        following = start + self.every if self.every else math.inf
        return following if following < horizon else math.inf


@dataclass(frozen=True)
class Window:
    name: str
    kind: str
    target: dict
    params: dict
    start: float  # seconds from the schedule's start
    end: float
    host: str | None = None  # the fault host that runs it (None: this process)


@dataclass
class Schedule:
    seed: int
    faults: list[FaultSpec] = field(default_factory=list)

    def windows(self, horizon: float = HORIZON_S, faults: Iterable[FaultSpec] | None = None) -> Iterator[Window]:
        """Every window (of `faults`, default all) that starts before `horizon`, in start order, lazily."""

        def of(f: FaultSpec) -> Iterator[Window]:
            params = f.applied_params
            return (Window(f.name, f.kind, f.target, params, s, s + f.duration, f.host) for s in f.starts(horizon))

        return heapq.merge(
            *(of(f) for f in (self.faults if faults is None else faults)), key=lambda w: (w.start, w.name)
        )

    def count(self, horizon: float) -> int:
        return sum(f.count(horizon) for f in self.faults)

    def end(self) -> float:
        """When the last window ends (faults that repeat never end: inf)."""
        return max((math.inf if f.every else f.at + f.duration for f in self.faults), default=0.0)

    def active(self, t: float, horizon: float = HORIZON_S) -> list[str]:
        """The names of the faults whose windows `t` (seconds from the start) falls in, sorted."""
        return sorted(f.name for f in self.faults if f.covers(t, horizon))

    def on(self, host: str | None) -> Schedule:
        """The faults that run on `host` (None: on the schedule's own process)."""
        return Schedule(self.seed, [f for f in self.faults if f.host == host])

    def hosts(self) -> list[str]:
        """The fault hosts the schedule names, sorted."""
        return sorted({f.host for f in self.faults if f.host is not None})

    def by_target(self) -> dict[tuple[str, str], list[FaultSpec]]:
        """The faults grouped by (kind, target): each group's windows never overlap."""
        groups: dict[tuple[str, str], list[FaultSpec]] = {}
        for f in self.faults:
            groups.setdefault((f.kind, f.target_key), []).append(f)
        return groups


class _Reader(yamlfile.Reader):
    """Reads one schedule file's nodes, every error naming its file, line and field."""

    def fail(self, node: yaml.Node, field: str, message: str) -> UsageError:
        return super().fail(node, field or "schedule", message)  # the top level is a field too

    def seconds(self, node: yaml.Node, where: str) -> float:
        s = duration(self.value(node, where), where, self.path, yamlfile.line(node))
        if not math.isfinite(s):
            raise self.fail(node, where, "must be finite")
        if s > YEAR_S:
            raise self.fail(node, where, f"at most {YEAR_S:g}s (a year)")
        return s


def load(path: str, kinds: dict[str, type[Injector]]) -> Schedule:
    """Parse and validate; `kinds` maps each kind to its injector (which checks target and params)."""
    root = yamlfile.compose(path)
    r = _Reader(path)
    if not isinstance(root, yaml.MappingNode):
        raise r.fail(root, "faults", "a schedule is a mapping with 'faults'")
    top = r.mapping(root, "")
    for name, (k, _) in top.items():
        if name not in ("seed", "faults"):
            raise r.fail(k, name, "unknown field")
    seed = r.value(top["seed"][1], "seed") if "seed" in top else 0
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise r.fail(top["seed"][1], "seed", "must be an integer")
    if "faults" not in top or not isinstance(top["faults"][1], yaml.SequenceNode):
        raise r.fail(top["faults"][1] if "faults" in top else root, "faults", "must be a list of faults")
    specs: list[FaultSpec] = []
    names: set[str] = set()
    for i, node in enumerate(top["faults"][1].value):
        specs.append(_fault(r, node, i, kinds, names))
        names.add(specs[-1].name)
    schedule = Schedule(seed, specs)
    _check_overlaps(schedule, path, kinds)
    return schedule


def _fault(r: _Reader, node: yaml.Node, index: int, kinds: dict[str, type[Injector]], taken: set[str]) -> FaultSpec:
    """The fault entry faults[index], validated (`taken`: the names before it)."""
    where = f"faults[{index}]"
    if not isinstance(node, yaml.MappingNode):
        raise r.fail(node, where, "must be a mapping")
    items = r.mapping(node, where)
    for name, (k, _) in items.items():
        if name not in FIELDS:
            raise r.fail(k, f"{where}.{name}", "unknown field")
    for name in ("name", "kind", "target", "at", "duration"):
        if name not in items:
            raise r.fail(node, f"{where}.{name}", "missing")
    values = {
        name: r.value(v, f"{where}.{name}") for name, (_, v) in items.items() if name not in ("at", "duration", "every")
    }
    spec_name, kind, target = values["name"], values["kind"], values["target"]
    params = values.get("params", {})
    if not isinstance(spec_name, str) or not spec_name.strip():
        raise r.fail(items["name"][1], f"{where}.name", "must be a string (it becomes the phase label)")
    if spec_name in taken:
        raise r.fail(items["name"][1], f"{where}.name", f"duplicate name {spec_name!r}")
    if not isinstance(kind, str) or kind not in kinds:
        raise r.fail(items["kind"][1], f"{where}.kind", f"unknown kind {kind!r} (one of {', '.join(sorted(kinds))})")
    if not isinstance(target, dict) or not target:
        raise r.fail(items["target"][1], f"{where}.target", "must be a non-empty mapping")
    for key, value in target.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, (str, int)):
            raise r.fail(items["target"][1], f"{where}.target.{key}", "must be a string or an integer")
    host, target = _host(r, items["target"][1], where, kind, target)
    if not isinstance(params, dict):
        raise r.fail(items["params"][1], f"{where}.params", "must be a mapping")
    aim = {key: values[key] for key in AIM if key in values}
    for key in aim:
        if not kinds[kind].aimed:
            aimed = " and ".join(sorted(n for n, i in kinds.items() if i.aimed))
            raise r.fail(items[key][1], f"{where}.{key}", f"only {aimed} take a {key}, not {kind}")
    for key in AIM:
        if key in params:
            raise r.fail(items["params"][1], f"{where}.params.{key}", f"goes beside params ({key}: ...), not in")
    at, length = r.seconds(items["at"][1], f"{where}.at"), r.seconds(items["duration"][1], f"{where}.duration")
    every = r.seconds(items["every"][1], f"{where}.every") if "every" in items else None
    if length <= 0:
        raise r.fail(items["duration"][1], f"{where}.duration", "must be positive")
    if every is not None and every < max(length, MIN_EVERY_S):
        raise r.fail(
            items["every"][1], f"{where}.every", "must be at least the duration (windows would overlap) and 1ms"
        )
    try:
        kinds[kind].check(target, {**params, **aim})
    except ValueError as e:
        bad = getattr(e, "field", "params")
        at_node = items[bad.split(".")[0]][1] if bad.split(".")[0] in items else node
        raise r.fail(at_node, f"{where}.{bad}", str(e)) from None
    return FaultSpec(
        spec_name,
        kind,
        target,
        at,
        length,
        every,
        params,
        yamlfile.line(node),
        yamlfile.line(items["target"][1]),
        yamlfile.line(items["params"][1] if "params" in items else node),
        index,
        direction if isinstance(direction := aim.get("direction"), str) else None,  # (checked above)
        match if isinstance(match := aim.get("match"), dict) else None,
        {name: yamlfile.line(v) for name, (_, v) in items.items()},
        host,
    )


def _host(r: _Reader, node: yaml.Node, where: str, kind: str, target: dict) -> tuple[str | None, dict]:
    """(the fault host the target names, the target its injector gets); a docker daemon's URL in
    `host` is the injector's own field."""
    host = target.get("host")
    if host is None or (kind == "docker" and isinstance(host, str) and "://" in host):
        return None, target
    if not is_name(host):
        raise r.fail(node, f"{where}.target.host", f"must be a fault host's name (one word), got {host!r}")
    rest = {k: v for k, v in target.items() if k != "host"}
    if not rest:
        raise r.fail(node, f"{where}.target", "names only a host: say what on it (an interface, a GPU, ...)")
    return host, rest


def _overlap_groups(schedule: Schedule, kinds: dict[str, type[Injector]]) -> Iterator[list[FaultSpec]]:
    """The groups of faults whose windows must never overlap: one kind on one target; for a kind
    whose injector says what of its target a window takes (`claim(target)`: the thing, and the part
    of it, None for a part known only at run time), one kind on one part of one thing, together with
    that thing's windows whose part may be any."""
    things: dict[tuple[str, str], dict[str | None, list[FaultSpec]]] = {}
    for (kind, key), group in schedule.by_target().items():
        claim = getattr(kinds[kind], "claim", None)
        thing, part = claim(group[0].target) if claim else (key, "")
        things.setdefault((kind, f"{group[0].host} {thing}"), {}).setdefault(part, []).extend(group)
    for parts in things.values():
        anywhere = parts.pop(None, [])
        yield from ([*group, *anywhere] for group in parts.values()) if parts else [anywhere]


def _check_overlaps(schedule: Schedule, path: str, kinds: dict[str, type[Injector]]) -> None:
    """Refuse two faults of one kind on one target whose windows ever overlap, naming the one whose
    window starts later: one-off windows by a sweep in start order, a repeating fault against each other."""

    def refuse(later: FaultSpec, earlier: FaultSpec, start_us: int) -> UsageError:
        return UsageError(
            f"overlaps {earlier.name!r} ({later.kind} on the same target) at {start_us / 1e6:g}s",
            file=path,
            line=later.line,
            field=f"faults[{later.index}]",
        )

    for group in _overlap_groups(schedule, kinds):
        trains = sorted(
            ((Train.of(f.at, f.duration, f.every), f.index, f) for f in group), key=lambda t: (t[0].at, t[1])
        )
        last: tuple[Train, int, FaultSpec] | None = None  # the one-off window that ends last so far
        for t in trains:
            if t[0].every is not None:
                continue
            if last is not None and first_overlap(last[0], t[0]):
                raise refuse(t[2], last[2], t[0].at)
            if last is None or t[0].at + t[0].length > last[0].at + last[0].length:
                last = t
        repeating = [t for t in trains if t[0].every is not None]
        for ta, ia, a in repeating:
            for tb, ib, b in trains:
                found = None if (tb.every is not None and ib <= ia) else first_overlap(ta, tb)
                if found is not None:
                    later_a = (found[0], ia) > (found[1], ib)
                    raise refuse(a, b, found[0]) if later_a else refuse(b, a, found[1])
