"""The master's record of the windows it leases to fault hosts, and the phases they give requests.

A request is labelled by what its fault host acknowledged, mapped to the master's clock, never by
the plan: a window's name from its acknowledged apply to its acknowledged revert, nothing before
or after. Only what is known is labelled: a host's state is known up to `known` (the sending of the
latest lease it answered; every apply and revert until then is in that answer). Beyond it, while
one of its windows was applied or due, the master waits `hold_s` for news; then that stretch is
decided as `NAME:unconfirmed` (lost contact, a host that crashed or never answered), never
baseline. Decided stretches never change (`Phases`): the workers label each request with them once
its start is settled, and run.json keeps the same stretches per window.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from faults.host.clock import Offset
from faults.host.messages import Ack, Desired
from faults.schedule import Schedule
from faults.timeline import Phases, Segment
from llmchaos.run import FaultHost, FaultWindow

UNCONFIRMED = ":unconfirmed"
LOST_S = 2.5  # no ack from a host for this long: contact lost (a lease goes out every RENEW_S)
LEAD_S = 0.5  # a window is leased this long before its start, so its host applies it on time


@dataclass
class Host:
    name: str
    identity: str | None = None  # its ZeroMQ identity, from its hello (None: never heard)
    boot: str | None = None
    reach: dict[str, Any] = field(default_factory=dict)
    lateness_s: float = 1.0  # a lease this late renews nothing there: a window may outlive its end by this
    clock: Offset = field(default_factory=Offset)
    known: float = -math.inf  # master clock: its state is known up to here
    last_ack: float | None = None
    lost: list[list[float | None]] = field(default_factory=list)  # contact lost: [from, to or None]
    sent: dict[int, float] = field(default_factory=dict)  # lease seq -> its sending, until answered
    settle: list[str] = field(default_factory=list)  # windows whose record it may forget
    started: float = 0.0  # the followed run's start (its clock), from its hello
    heard: float = -math.inf  # master clock: its last hello or ack, the sign that it is alive
    past: set[str] = field(default_factory=set)  # boots it was followed at once: never believed again
    rival: str | None = None  # another live run's boot that said hello under this name (refused)
    energy: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # GPU -> (its clock, mJ)
    energy_why: str | None = None  # the last ack's word on what it could not read


@dataclass
class Tracked:
    """One window of a fault host, as far as the master knows."""

    id: str
    name: str
    kind: str
    target: dict[str, Any]
    params: dict[str, Any]
    host: str
    planned_start: float
    planned_end: float
    boots: dict[str, list[list[float | None]]] = field(default_factory=dict)  # per run of the host: its record
    doubt: list[tuple[float, float]] = field(default_factory=list)  # master clock: unconfirmed whatever a host says
    error: str | None = None
    why: str | None = None
    applied_heard: float | None = None  # when the master first heard it applied
    reverted_heard: float | None = None  # when it last heard it reverted
    unconfirmed: list[list[float]] = field(default_factory=list)

    @property
    def raw(self) -> list[list[float | None]]:
        """Every [applied, reverted] the host's runs reported (its clock), in order."""
        return [s for spans in self.boots.values() for s in spans]

    def spans(self, clock: Offset) -> list[tuple[float, float]]:
        """[applied, reverted) on the master's clock (an open one runs to infinity)."""
        return [(clock.to_master(a), math.inf if r is None else clock.to_master(r)) for a, r in self.raw if a]

    def held(self) -> bool:
        return any(r is None for _, r in self.raw)

    def restarted(self, h: Host, seen: float) -> None:
        """The host came back as a new run at `seen`: what its last run held ended unseen, somewhere
        between its last answer and now (the new run swept its journal before saying hello)."""
        for spans in self.boots.values():
            if spans and spans[-1][1] is None:
                spans[-1][1] = h.clock.offset + h.known
                self.doubt.append((h.known, seen))


class Ledger:
    def __init__(self, schedule: Schedule, horizon: float, lease_s: float, hold_s: float) -> None:
        self.specs = [f for f in schedule.faults if f.host is not None]
        self.horizon, self.lease_s, self.hold_s = horizon, lease_s, hold_s
        self.hosts = {name: Host(name) for name in schedule.hosts()}
        self.windows: dict[str, Tracked] = {}
        self.phases = Phases()
        self.t0: float | None = None
        self.stopped = math.inf  # master clock: nothing is wanted from here on

    def renewed(self) -> Ledger:
        """A fresh ledger for the next test, the hosts' connections carried over."""
        new = Ledger(Schedule(0, self.specs), self.horizon, self.lease_s, self.hold_s)
        for name, h in self.hosts.items():
            n = new.hosts[name]
            n.identity, n.boot, n.reach, n.lateness_s = h.identity, h.boot, h.reach, h.lateness_s
        return new

    def stop(self, now: float) -> None:
        """Nothing is wanted from `now` on: the next leases list no window."""
        self.stopped = min(self.stopped, now)

    def begin(self, t0: float, now: float) -> None:
        """Leasing starts: before `now` no host can have applied a window of this session."""
        self.t0 = t0
        for h in self.hosts.values():
            h.known = now
        self.phases.settled = now

    def desired(self, host: str, now: float) -> list[Desired]:
        """The windows `host` should have applied at `now`, or within LEAD_S (`starts_in`: it journals
        them ahead and applies them on time by its own clock), each leased for at most `lease_s`."""
        if self.t0 is None or now >= self.stopped:
            return []
        out = []
        for f in self.specs:
            if f.host != host:
                continue
            since = now - self.t0
            occ = f.occurrence(since, self.horizon)
            if occ is None and (start := f.next_edge(since, self.horizon)) - since <= LEAD_S:
                occ = f.occurrence(start, self.horizon)
            if occ is None:
                continue
            k, start = occ
            end = min(self.t0 + start + f.duration, self.t0 + self.horizon, self.stopped)
            w = self.windows.setdefault(
                f"{f.name}#{k}",
                Tracked(f"{f.name}#{k}", f.name, f.kind, f.target, f.applied_params, host, self.t0 + start, end),
            )
            left, ahead = end - now, max(0.0, w.planned_start - now)
            out.append(
                Desired(w.id, w.name, w.kind, w.target, w.params, min(self.lease_s, left), left <= self.lease_s, ahead)
            )
        return out

    def next_edge(self, now: float) -> float:
        """When the master should lease next: a window of a fault host starts or ends, or one is
        LEAD_S from its start (master clock)."""
        if self.t0 is None:
            return math.inf
        since = now - self.t0
        edges = [f.next_edge(since, self.horizon) for f in self.specs]
        ahead = [f.next_edge(since + LEAD_S, self.horizon) - LEAD_S for f in self.specs]
        return self.t0 + min([*edges, *(e for e in ahead if e > since)], default=math.inf)

    def ack(self, host: str, ack: Ack, t4: float) -> None:
        """A host's answer to lease `ack.seq`, received at `t4`: its clock, its windows' records."""
        h = self.hosts[host]
        t1 = h.sent.pop(ack.seq, None)
        if t1 is None:
            return  # not a lease of ours still waiting (answered before, or superseded)
        for seq in [s for s in h.sent if s < ack.seq]:
            del h.sent[seq]  # the host took a newer one instead
        h.clock.add(t1, float(ack.t2), float(ack.t3), t4)
        h.known, h.last_ack = max(h.known, t1), t4
        if h.lost and h.lost[-1][1] is None:
            h.lost[-1][1] = t4
        h.settle = []
        for j in ack.energy:
            h.energy.setdefault(j.gpu, []).append((float(j.t), float(j.mj)))
        h.energy_why = ack.energy_why
        for rec in ack.windows:
            w = self.windows.get(rec.id)
            if w is None:
                continue
            was_held = w.held()
            w.boots[ack.boot] = [list(s) for s in rec.spans]
            w.error, w.why = rec.error, rec.why
            if w.raw and w.applied_heard is None:
                w.applied_heard = t4
            if w.raw and was_held and not w.held():
                w.reverted_heard = t4
            if not w.held() and (w.planned_end <= t1 or t1 >= self.stopped):
                h.settle.append(w.id)

    def energy(self, host: str) -> tuple[dict[str, list[tuple[float, float]]], str | None]:
        """A host's GPU energy counters (mJ) at the master's clock (its best offset now), and why any
        could not be read; none and why when the host never answered or has no GPU."""
        h = self.hosts.get(host)
        if h is None or h.last_ack is None:
            return {}, f"fault host {host} never acknowledged a lease"
        series = {g: [(h.clock.to_master(t), mj) for t, mj in s] for g, s in h.energy.items()}
        return series, h.energy_why

    def _margin(self, w: Tracked) -> float:
        """How long the host may have held `w` had it heard a lease we do not know it heard."""
        return min(w.planned_end, self.stopped) + self.hosts[w.host].lateness_s

    def _unsure(self, h: Host) -> bool:
        """Whether what `h` did after `h.known` may matter: one of its windows held or still due then."""
        return any(w.host == h.name and (w.held() or self._margin(w) > h.known) for w in self.windows.values())

    def advance(self, now: float, final: bool = False) -> list[Segment]:
        """Decide the labels from the last settled time up to what is known now (or, `final`, up to
        `now` whatever is known); the new segments, also added to `phases`."""
        for h in self.hosts.values():
            if h.last_ack is not None and now - h.last_ack > LOST_S and not (h.lost and h.lost[-1][1] is None):
                h.lost.append([h.last_ack, None])
        hi = now
        if not final:
            for h in self.hosts.values():
                if self._unsure(h):
                    hi = min(hi, max(h.known, now - self.hold_s))
        lo = self.phases.settled
        if hi <= lo:
            return []
        pieces: list[tuple[float, float, str]] = []
        for w in self.windows.values():
            h = self.hosts[w.host]
            spans = w.spans(h.clock)
            top = min(hi, h.known)
            on = [(max(a, lo), min(r, top)) for a, r in spans if min(r, top) > max(a, lo)]
            doubt = [(max(a, lo), min(b, hi)) for a, b in w.doubt if min(b, hi) > max(a, lo)]
            pieces += [(a, b, w.name) for a, b in _minus(on, doubt)]
            pieces += [(a, b, w.name + UNCONFIRMED) for a, b in doubt]
            for d in doubt:
                _merge(w.unconfirmed, d)
            if hi > max(lo, h.known):
                a = max(lo, h.known)
                held = any(s <= h.known < r for s, r in spans) or w.held()
                u = (a, hi) if held else (max(a, w.planned_start), min(hi, self._margin(w)))
                if u[1] > u[0]:
                    pieces.append((u[0], u[1], w.name + UNCONFIRMED))
                    _merge(w.unconfirmed, u)
        segments = _flatten(pieces)
        self.phases.extend(segments, hi)
        return segments

    def provisional(self, t: float) -> tuple[str, ...]:
        """Labels for `t` beyond what is settled (the live phase): acknowledged so far, or held."""
        if t <= self.phases.settled:
            return self.phases.labels(t)
        out = set()
        for w in self.windows.values():
            if any(a <= t < r for a, r in w.spans(self.hosts[w.host].clock)):
                out.add(w.name)
        return tuple(sorted(out))


def _minus(spans: list[tuple[float, float]], holes: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """`spans` less every hole."""
    for ha, hb in holes:
        spans = [p for a, b in spans for p in ((a, min(b, ha)), (max(a, hb), b)) if p[1] > p[0]]
    return spans


def _merge(spans: list[list[float]], u: tuple[float, float]) -> None:
    """Add `u` to spans kept in time order, joining it to the last when they touch."""
    if spans and u[0] <= spans[-1][1] + 1e-9:
        spans[-1][1] = max(spans[-1][1], u[1])
    else:
        spans.append([u[0], u[1]])


def _flatten(pieces: list[tuple[float, float, str]]) -> list[Segment]:
    """Overlapping labelled pieces as segments that do not overlap, each with every label on it."""
    edges = sorted({x for a, b, _ in pieces for x in (a, b)})
    out: list[Segment] = []
    for a, b in itertools.pairwise(edges):
        labels = tuple(sorted({label for s, e, label in pieces if s <= a and e >= b}))
        if not labels:
            continue
        if out and out[-1].labels == labels and out[-1].end == a:
            out[-1] = Segment(out[-1].start, b, labels)
        else:
            out.append(Segment(a, b, labels))
    return out


def timeline(ledger: Ledger) -> list[FaultWindow]:
    """Each tracked window as run.json keeps it (master's clock)."""
    out = []
    for w in sorted(ledger.windows.values(), key=lambda w: (w.planned_start, w.name)):
        clock = ledger.hosts[w.host].clock
        spans = [(a, None if math.isinf(r) else r) for a, r in w.spans(clock)]
        error = w.error
        if not w.raw and error is None:
            error = "never acknowledged: the host never said it applied it"
        out.append(
            FaultWindow(
                name=w.name,
                kind=w.kind,
                target={**w.target, "host": w.host},
                params=w.params,
                planned_start=w.planned_start,
                planned_end=w.planned_end,
                actual_start=spans[0][0] if spans else None,
                actual_end=spans[-1][1] if spans else None,
                error=error,
                host=w.host,
                spans=spans,
                unconfirmed=[(a, b) for a, b in w.unconfirmed],
                apply_ack_lag_s=None if w.applied_heard is None else w.applied_heard - w.planned_start,
                revert_ack_lag_s=None if w.reverted_heard is None else w.reverted_heard - w.planned_end,
                why=w.why,
            )
        )
    return out


def hosts(ledger: Ledger) -> list[FaultHost]:
    return [
        FaultHost(
            name=h.name,
            connected=h.boot is not None,
            offset_s=h.clock.offset if h.clock.best else None,
            uncertainty_s=h.clock.uncertainty,
            round_trip_s=h.clock.best.delay if h.clock.best else None,
            acks=h.clock.count,
            lost_contact=[(a, b) for a, b in h.lost if a is not None],
            reach=h.reach,
        )
        for h in ledger.hosts.values()
    ]
