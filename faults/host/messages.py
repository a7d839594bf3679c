"""The messages between a Locust master and a fault host, with their payloads (sealed: wire.py).
They live here, not in loadtests/protocol.py, because the fault host must read them without
importing the load tests; protocol.py lists them with the master's and workers' own.

- `llmchaos_host_hello`, host -> master, every HELLO_S until a master leases it: `Hello`;
- `llmchaos_host_probe`, master -> host before any load starts: `Probe`; answered by
  `llmchaos_host_probed`: `Probed`;
- `llmchaos_lease`, master -> host every second and at each window's start and end: `Lease`, the
  windows that host should have applied now (or, `starts_in`, in a moment: it journals them ahead
  and applies them when due by its own clock), each for `expires_in` seconds at most;
- `llmchaos_host_ack`, host -> master, the answer to each lease: `Ack`, every window's record on
  the host (when it applied and reverted it, by its own clock), the times for the clock offset, and
  its GPUs' energy counters read then (a load test's `--energy-from host:NAME`).
"""

from __future__ import annotations

import dataclasses
import math
import types
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from faults.host.seal import Refused

HELLO, PROBE, PROBED, LEASE, ACK = (
    "llmchaos_host_hello",
    "llmchaos_host_probe",
    "llmchaos_host_probed",
    "llmchaos_lease",
    "llmchaos_host_ack",
)
HELLO_S = 1.0  # a host not leased says hello this often
RENEW_S = 1.0  # the master leases every host at least this often


@dataclass(frozen=True)
class Hello:
    name: str
    boot: str  # this run of the host: a random nonce that every master message must carry back (`to`)
    reach: dict[str, Any]  # what it may touch (reach.Reach.declare)
    max_lateness: float = 1.0  # a lease later than this renews nothing there (`faults host --max-lateness`)
    started: float = 0.0  # when this run of the host began (its wall clock): an older run's hello is refused


@dataclass(frozen=True)
class Planned:
    """A fault as the host is asked to probe it."""

    fault: str
    kind: str
    target: dict[str, Any]
    params: dict[str, Any]


@dataclass(frozen=True)
class Probe:
    to: str
    session: str
    faults: list[Planned]


@dataclass(frozen=True)
class Verdict:
    reason: str | None = None  # why this target cannot take its fault here; None: it can
    field: str | None = None  # the schedule's field at fault (target, params.x, direction, ...)


@dataclass(frozen=True)
class Probed:
    boot: str
    session: str
    results: dict[str, Verdict]  # per fault name


@dataclass(frozen=True)
class Desired:
    """A window the host should have applied now."""

    id: str  # unique in the master's session: NAME#k, its k-th window
    name: str
    kind: str
    target: dict[str, Any]
    params: dict[str, Any]
    expires_in: float  # seconds from the lease's sending: revert by then unless renewed
    ends: bool = False  # `expires_in` is when the window itself ends, not only the lease
    starts_in: float = 0.0  # seconds from the lease's sending to its start: listed ahead, applied then


@dataclass(frozen=True)
class Lease:
    to: str
    session: str
    seq: int
    sent: float  # the master's clock
    windows: list[Desired]
    settled: list[str] = field(default_factory=list)  # windows whose record the master has whole: forget them
    sent_mono: float | None = None  # the master's monotonic clock at sending: lateness is judged on it, which
    # a step of its wall clock (NTP, a VM resumed) does not move


@dataclass(frozen=True)
class Record:
    """One window as the host ran it (its clock): each time it was applied and reverted."""

    id: str
    name: str
    spans: list[list[float | None]] = field(default_factory=list)  # [applied, reverted or None]
    error: str | None = None  # refused or failed, in one line
    why: str | None = None  # why it was last reverted (the master's state, the lease ran out, ...)


@dataclass(frozen=True)
class Joules:
    """One GPU's NVML energy counter (mJ since the driver loaded), read on the host (its clock)."""

    gpu: str  # its UUID
    t: float
    mj: float


@dataclass(frozen=True)
class Ack:
    boot: str
    session: str
    seq: int  # the lease answered
    t1: float  # the lease's sending (master's clock)
    t2: float  # its receipt (host's clock)
    t3: float  # this ack's sending (host's clock), after the lease's applies and reverts
    windows: list[Record]
    stale: bool = False  # the lease came too late to act on
    energy: list[Joules] = field(default_factory=list)  # its GPUs' counters, read after acting on the lease
    energy_why: str | None = None  # why some or all of them could not be read


M = TypeVar("M")
NESTED: dict[tuple[type, str], type] = {}


def body(message: object) -> dict[str, Any]:
    return asdict(message)  # type: ignore[call-overload]


def parse(cls: type[M], data: object) -> M:
    """A payload from its sealed body (Refused if it does not have the fields `cls` needs)."""
    try:
        return _build(cls, data)
    except (KeyError, TypeError, ValueError) as e:
        raise Refused(f"malformed {cls.__name__}: {e}") from None


def _fits(value: object, hint: object) -> bool:
    """Whether a JSON value is what the payload's field is declared as (a float finite, a bool no int)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(x, args[0]) for x in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) and _fits(x, args[1]) for k, x in value.items())
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is type(None):
        return value is None
    return isinstance(hint, type) and isinstance(value, hint)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _build(cls: type[M], data: object) -> M:
    if not isinstance(data, dict):
        raise TypeError("not an object")
    values = {}
    hints = _hints(cls)  # type: ignore[arg-type]
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise KeyError(f.name)
            continue
        inner = NESTED.get((cls, f.name))
        v = data[f.name]
        if inner is not None and isinstance(v, list):
            v = [_build(inner, x) for x in v]
        elif inner is not None and isinstance(v, dict):
            v = {str(k): _build(inner, x) for k, x in v.items()}
        if not _fits(v, hints[f.name]):
            raise TypeError(f"{f.name} is {v!r:.40}, not {hints[f.name]}")
        values[f.name] = v
    return cls(**values)


NESTED.update(
    {
        (Probe, "faults"): Planned,
        (Probed, "results"): Verdict,
        (Lease, "windows"): Desired,
        (Ack, "windows"): Record,
        (Ack, "energy"): Joules,
    }
)
