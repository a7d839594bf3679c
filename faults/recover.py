"""`llmchaos faults recover` and the sweep before every run: revert whatever the journal still holds."""

from __future__ import annotations

import os

import psutil

from faults.injectors import KINDS
from faults.injectors.base import InjectError, TargetGone
from faults.journal import Journal


def recover(journal: Journal, skip_live: bool = False) -> list[str]:
    """Revert whatever the journal still holds; one line per entry: `reverted ...` once the target
    reads back as before, `dropped ...` when the target itself is gone (nothing left to revert), or
    `could not revert ...` (the entry stays). With `skip_live`, the entries of another runner that
    is still alive are left to it."""
    lines = []
    for e in journal.entries():
        if skip_live and e["pid"] != os.getpid() and psutil.pid_exists(e["pid"]):
            continue
        what = f"{e['kind']} {e['name']} on {e['target']}"
        try:
            KINDS[e["kind"]](e["target"]).revert(e["saved"])
            line = f"reverted {what}"
        except TargetGone as err:
            line = f"dropped {what}: {err}; nothing left to revert"
        except (InjectError, KeyError) as err:
            lines.append(f"could not revert {what}: {err}")
            continue
        journal.remove(e["id"])
        journal.note(line.split()[0], e["name"], "llmchaos faults recover", window=e.get("lease", {}).get("window"))
        lines.append(line)
    return lines
