"""The recovery journal shared by processes: what each adds and removes at once is all there, nothing
removed comes back (the rest of the journal: tests/unit/faults/test_journal.py)."""

from __future__ import annotations

import multiprocessing

from faults.journal import Journal

ENTRIES_PER_PROCESS = 150


def _churn(path: str, tag: str) -> None:
    """Add entries while the other process does too; remove every other one of its own."""
    journal = Journal(path)
    for i in range(ENTRIES_PER_PROCESS):
        entry = journal.add(f"{tag}-{i}", "sse", {"proxy": "127.0.0.1:9"}, {}, {})
        if i % 2:
            journal.remove(entry)


def test_two_processes_lose_no_entry_and_resurrect_none(tmp_path):
    path = str(tmp_path / "journal.json")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_churn, args=(path, tag)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    names = sorted(e["name"] for e in Journal(path).entries())
    kept = sorted(f"{tag}-{i}" for tag in ("a", "b") for i in range(0, ENTRIES_PER_PROCESS, 2))
    assert names == kept
