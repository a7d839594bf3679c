"""The recovery journal: a fault is written here before it is applied and removed once reverted,
so `llmchaos faults recover` can undo whatever a killed runner left behind."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path

DEFAULT = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "llmchaos" / "journal.json"


class Journal:
    def __init__(self, path: str | Path = DEFAULT) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()  # each fault's thread reads, changes and rewrites the file

    def entries(self) -> list[dict]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []

    def _write(self, entries: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(entries, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)  # atomic: a kill never leaves half a journal

    def add(self, name: str, kind: str, target: dict, params: dict, saved: dict) -> str:
        """Record a fault about to be applied, with the state its revert restores."""
        entry_id = uuid.uuid4().hex
        with self._lock:
            self._write(
                [
                    *self.entries(),
                    {
                        "id": entry_id,
                        "name": name,
                        "kind": kind,
                        "target": target,
                        "params": params,
                        "saved": saved,
                        "pid": os.getpid(),
                        "at": time.time(),
                    },
                ]
            )
        return entry_id

    def remove(self, entry_id: str) -> None:
        with self._lock:
            self._write([e for e in self.entries() if e["id"] != entry_id])
