"""The fault host's hands: it makes this host's faults match the master's last lease, with the
same injectors and journal as `faults run`, and reverts by itself whatever a lease stops covering.

Level-triggered, as Chaos Mesh's controllers are: each lease lists every window that should be
applied now; one that is not applied yet is (journal first, apply, read back), one applied and
no longer listed is reverted, one still listed has its expiry pushed on. A window whose expiry
passes without renewal (the master died, the network split) is reverted here, with the reason in
the journal's history. What it did is kept per window (`Record`, this host's clock) and sent with
every acknowledgement until the master says it has it.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

import psutil

from faults.host.messages import Desired, Lease, Record
from faults.host.reach import Reach
from faults.injectors import KINDS
from faults.injectors.base import InjectError, Injector, TargetGone
from faults.journal import LEFT, Journal
from llmchaos.errors import UsageError

log = logging.getLogger("llmchaos.faults.host")


@dataclass
class Held:
    """A window journaled here: applied, or (`due` ahead) waiting for its start."""

    window: Desired
    session: str
    injector: Injector
    saved: dict
    entry: str  # its journal entry
    due: float  # monotonic: when it is applied
    expires: float  # monotonic
    renewed: float  # monotonic: the last lease that listed it
    applied: bool = False


@dataclass
class Log:
    """A window's record as it grows (sent as a `Record`)."""

    id: str
    name: str
    spans: list[list[float | None]] = field(default_factory=list)
    error: str | None = None
    why: str | None = None

    def record(self) -> Record:
        return Record(self.id, self.name, [list(s) for s in self.spans], self.error, self.why)


class Applier:
    def __init__(self, reach: Reach, journal: Journal, max_lease_s: float) -> None:
        self.reach, self.journal, self.max_lease_s = reach, journal, max_lease_s
        self.held: dict[str, Held] = {}  # window id -> applied now
        self.logs: dict[str, dict[str, Log]] = {}  # session -> window id -> its record, until settled
        self._injectors: dict[str, Injector] = {}

    def sweep(self) -> list[str]:
        """Revert what a run of this host that is gone left in the journal (another live process's
        entries are its own); a leased window's revert goes into its session's records. One line each."""
        lines = []
        for e in self.journal.entries():
            if e["pid"] != os.getpid() and psutil.pid_exists(e["pid"]):
                continue
            what = f"{e['kind']} {e['name']} on {e['target']}"
            try:
                KINDS[e["kind"]](e["target"]).revert(e["saved"])
            except TargetGone as err:
                log.warning("swept %s: %s; nothing left to revert", what, err)
            except (InjectError, KeyError) as err:
                lines.append(f"could not revert {what}: {err}")
                continue
            self.journal.remove(e["id"])
            why = "swept at start: a run of this fault host that stopped without reverting left it"
            self.journal.note("reverted", e["name"], why, window=e.get("lease", {}).get("window"))
            if lease := e.get("lease"):
                rec = self._log(lease["session"], lease["window"], e["name"])
                rec.spans.append([e["at"], time.time()])
                rec.why = why
            lines.append(f"reverted {what}")
        return lines

    def _log(self, session: str, window: str, name: str) -> Log:
        return self.logs.setdefault(session, {}).setdefault(window, Log(window, name))

    def records(self, session: str) -> list[Record]:
        return [rec.record() for rec in self.logs.get(session, {}).values()]

    def match(self, lease: Lease, anchor: float) -> None:
        """Make what is applied match `lease`, sent at `anchor` (monotonic, as this host sees it): a
        window listed ahead of its start is journaled now and applied when due (`tick`)."""
        for wid in lease.settled:
            self.logs.get(lease.session, {}).pop(wid, None)
        for other in [s for s in self.logs if s != lease.session]:
            del self.logs[other]  # a new master session: the old one's records go nowhere now
        wanted = {w.id: w for w in lease.windows}
        for wid, held in list(self.held.items()):
            if held.session != lease.session or wid not in wanted:
                self.revert(wid, "the master's lease no longer lists it (its window ended)")
        now = time.monotonic()
        for w in lease.windows:
            expires = anchor + min(max(0.0, w.expires_in), self.max_lease_s)
            due = anchor + max(0.0, w.starts_in)
            if w.id in self.held:
                held = self.held[w.id]
                held.window, held.expires, held.renewed = w, expires, now
                held.due = held.due if held.applied else due
            elif expires > now and (prepared := self.prepare(lease.session, w, due, expires, now)) is not None:
                self.held[w.id] = prepared
        self.tick()

    def prepare(self, session: str, w: Desired, due: float, expires: float, now: float) -> Held | None:
        """Check and journal one window (with what its revert restores); a refusal is its record's error."""
        rec = self._log(session, w.id, w.name)
        refused = self.reach.refusal(w.kind, w.target) if w.kind in KINDS else f"unknown kind {w.kind!r}"
        if refused is None:
            try:
                refused = self._injector(w).probe()  # the injector's own allowlist, a leftover in the way
            except Exception as e:  # noqa: BLE001 - a target that cannot even be probed is refused
                refused = f"{type(e).__name__}: {e}"
        if refused is not None:
            if rec.error != f"refused: {refused}":
                log.warning("refused %s (%s on %s): %s", w.name, w.kind, w.target, refused)
                self.journal.note("refused", w.name, refused, window=w.id, kind=w.kind, target=w.target)
            rec.error = f"refused: {refused}"
            return None
        try:
            injector = self._injector(w)
            saved = injector.save(w.params)
            entry = self.journal.add(w.name, w.kind, w.target, w.params, saved, {"session": session, "window": w.id})
        except (InjectError, OSError, UsageError) as e:
            rec.error = f"not applied: {e}"
            log.error("%s: %s", w.name, rec.error)
            return None
        return Held(w, session, injector, saved, entry, due, expires, now)

    def tick(self) -> None:
        """Apply what is due; revert what expired."""
        now = time.monotonic()
        for wid, held in list(self.held.items()):
            if held.expires <= now:
                ended = held.window.ends and held.window.expires_in <= self.max_lease_s  # not this host's cap
                why = "its window ended (the last lease said when)" if ended else None
                self.revert(wid, why or f"lease expired: no renewal from the master for {now - held.renewed:.1f} s")
            elif not held.applied and held.due <= now:
                self.apply(wid)

    def apply(self, wid: str) -> None:
        """Apply and read back a journaled window; a failure is its record's error (and reverted)."""
        held = self.held[wid]
        w, injector, saved, rec = held.window, held.injector, held.saved, self._log(held.session, wid, held.window.name)
        late = time.monotonic() - held.due
        try:
            applied = injector.apply(w.name, w.params, saved)
            at = time.time()  # in effect: before the journal's write, which a busy disk can hold up
            if applied:
                held.saved = saved = {**saved, **applied}
                self.journal.update(held.entry, saved)
            if confirm := getattr(injector, "confirm", None):
                confirm(w.params)  # read back before it counts as applied
        except Exception as e:  # noqa: BLE001 - whatever apply raised, what it left must be reverted
            rec.error = f"not applied: {e}" if isinstance(e, InjectError) else f"not applied: {type(e).__name__}: {e}"
            log.error("%s: %s", w.name, rec.error)
            del self.held[wid]
            self._undo(injector, saved, held.entry, w.name, rec)
            return
        rec.spans.append([at, None])
        rec.error, held.applied = None, True
        self.journal.note("applied", w.name, "the master's lease lists it", window=wid, kind=w.kind, target=w.target)
        log.info("applied %s (%s on %s) %.0f ms after it was due", w.name, w.kind, w.target, late * 1000)

    def _injector(self, w: Desired) -> Injector:
        key = f"{w.kind} {sorted(w.target.items())}"
        if key not in self._injectors:
            self._injectors[key] = KINDS[w.kind](w.target, self.reach.allow)
        return self._injectors[key]

    def _undo(self, injector: Injector, saved: dict, entry: str, name: str, rec: Log) -> float | None:
        """Revert and unjournal; when the target read back as before (else None: it stays journaled).
        The time is taken before the journal's write, which a busy disk can hold up."""
        try:
            injector.revert(saved)
        except TargetGone as e:
            log.warning("%s: %s; nothing left to revert", name, e)
        except InjectError as e:
            rec.error = f"revert failed, {LEFT}: {e}"
            log.error("%s: %s", name, rec.error)
            return None
        at = time.time()
        self.journal.remove(entry)
        return at

    def revert(self, wid: str, why: str) -> None:
        held = self.held.pop(wid)
        rec = self._log(held.session, wid, held.window.name)
        if not held.applied:  # journaled ahead of its start, never applied
            self.journal.remove(held.entry)
            return
        if (at := self._undo(held.injector, held.saved, held.entry, held.window.name, rec)) is None:
            return
        rec.spans[-1][1] = at
        rec.why = why
        self.journal.note("reverted", held.window.name, why, window=wid)
        log.info("reverted %s: %s", held.window.name, why)

    def next_deadline(self) -> float:
        """When `tick` has something to do next (monotonic)."""
        return min(
            (min(h.expires, h.due if not h.applied else h.expires) for h in self.held.values()), default=float("inf")
        )

    def revert_all(self, why: str) -> None:
        for wid in list(self.held):
            self.revert(wid, why)
