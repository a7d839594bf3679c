"""The recovery journal: a fault is written here before it is applied and removed once reverted,
so `llmchaos faults recover` can undo whatever a killed runner left behind.

Every change is a read-modify-write under an exclusive `flock` on `<journal>.lock`, so runners in
several processes (and their threads) share one journal without losing entries; the new journal
is written to a temporary file, fsynced and renamed over the old one, so a kill or a crash never
leaves half a journal. A journal that does not parse (or holds an entry without the fields below)
is moved aside for the operator, and every use of it is a one-line UsageError until then.

Beside it, `<journal>.history.jsonl` keeps what happened and why, one JSON line each (a fault host
notes every apply and every revert there: a lease that ran out, the master's state, a sweep).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from llmchaos.errors import UsageError

LEFT = "left in the journal (llmchaos faults recover reverts it)"  # what a failed revert leaves
DEFAULT = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "llmchaos" / "journal.json"


class Entry(TypedDict):
    id: str
    name: str
    kind: str
    target: dict
    params: dict
    saved: dict  # what `revert` restores (and, once applied, what `apply` read back)
    pid: int
    at: float
    lease: NotRequired[dict]  # a fault host's window: {session, window} of the master that leased it


FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "name": str,
    "kind": str,
    "target": dict,
    "params": dict,
    "saved": dict,
    "pid": int,
    "at": (int, float),
}


def _damage(entries: object) -> str | None:
    """What is wrong with a parsed journal, or None."""
    if not isinstance(entries, list):
        return "not a list of entries"
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            return f"entry {i} is not an object"
        for key, kind in FIELDS.items():
            if not isinstance(e.get(key), kind) or isinstance(e.get(key), bool):
                return f"entry {i} has no valid {key!r}"
    return None


class Journal:
    def __init__(self, path: str | Path = DEFAULT) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self.history = self.path.with_name(self.path.stem + ".history.jsonl")
        self._threads = threading.Lock()  # flock orders processes; this, the threads of one

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._threads:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock

    def check_writable(self) -> None:
        """UsageError (before anything is applied) unless this journal can be written."""
        tmp = self._tmp()
        try:
            with self._locked():
                tmp.touch()
                tmp.unlink()
        except OSError as e:
            raise UsageError(f"the fault journal cannot be written: {e.strerror}", file=str(self.path)) from None

    def _tmp(self) -> Path:
        return self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")

    def entries(self) -> list[Entry]:
        with self._locked():
            return self._read()

    def _read(self) -> list[Entry]:
        """The entries (caller holds the lock); a damaged journal is moved aside and refused."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        try:
            entries = json.loads(text)
            damage = _damage(entries)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            damage = f"not JSON: {e}"
        if damage is None:
            return entries
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        os.replace(self.path, aside)
        raise UsageError(
            f"damaged journal ({damage}); moved to {aside}: the faults it lists may still be applied, "
            "revert them by hand, then run again",
            file=str(self.path),
        )

    def _write(self, entries: list[Entry]) -> None:
        """Replace the journal atomically and durably (caller holds the lock)."""
        tmp = self._tmp()
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(entries, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)

    def add(self, name: str, kind: str, target: dict, params: dict, saved: dict, lease: dict | None = None) -> str:
        """Record a fault about to be applied, with the state its revert restores."""
        entry = Entry(
            id=uuid.uuid4().hex,
            name=name,
            kind=kind,
            target=target,
            params=params,
            saved=saved,
            pid=os.getpid(),
            at=time.time(),
        )
        if lease is not None:
            entry["lease"] = lease
        with self._locked():
            self._write([*self._read(), entry])
        return entry["id"]

    def update(self, entry_id: str, saved: dict) -> None:
        """Replace what an entry's revert restores (once the fault is applied and read back)."""
        with self._locked():
            self._write([Entry(**{**e, "saved": saved}) if e["id"] == entry_id else e for e in self._read()])

    def remove(self, entry_id: str) -> None:
        with self._locked():
            self._write([e for e in self._read() if e["id"] != entry_id])

    def note(self, event: str, name: str, why: str, **more: object) -> None:
        """Append one line to the history: what happened to fault `name`, and why."""
        line = json.dumps({"at": time.time(), "event": event, "name": name, "why": why, "pid": os.getpid(), **more})
        with self._locked(), open(self.history, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def notes(self) -> list[dict[str, Any]]:
        """The history, oldest first."""
        try:
            text = self.history.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]
