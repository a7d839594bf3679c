"""`llmchaos faults recover` and the sweep before every run: revert whatever the journal still holds."""

from __future__ import annotations

import os

import psutil

from faults.injectors import KINDS
from faults.injectors.base import InjectError
from faults.journal import Journal


def recover(journal: Journal, skip_live: bool = False) -> list[str]:
    """Revert whatever the journal still holds; returns one line per entry. With `skip_live`, the
    entries of another runner that is still alive are left to it."""
    lines = []
    for e in journal.entries():
        if skip_live and e["pid"] != os.getpid() and psutil.pid_exists(e["pid"]):
            continue
        try:
            KINDS[e["kind"]](e["target"]).revert(e.get("saved", {}))
            journal.remove(e["id"])
            lines.append(f"reverted {e['kind']} {e['name']} on {e['target']}")
        except (InjectError, KeyError) as err:
            lines.append(f"could not revert {e['kind']} {e['name']} on {e['target']}: {err}")
    return lines
