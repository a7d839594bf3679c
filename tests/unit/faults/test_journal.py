"""The recovery journal: written atomically, a damaged one refused in one line (shared by processes:
tests/integration/test_journal_processes.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.journal import Journal
from llmchaos.errors import UsageError
from tests.inprocess import llmchaos


def test_a_write_leaves_no_temporary_file(tmp_path):
    journal = Journal(tmp_path / "journal.json")
    journal.remove(journal.add("x", "sse", {"proxy": "127.0.0.1:9"}, {}, {}))
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["journal.json"]


DAMAGED = {
    "truncated": '[{"id": "1", "name": "drop", "kind": "sse", ',
    "empty": "",
    "no pid": json.dumps([{"id": "1", "name": "drop", "kind": "sse", "target": {}, "params": {}, "saved": {}}]),
    "not a list": json.dumps({"id": "1"}),
}


@pytest.mark.parametrize("text", DAMAGED.values(), ids=DAMAGED.keys())
def test_a_damaged_journal_is_refused_in_one_line_and_kept_aside(tmp_path, text):
    path = tmp_path / "journal.json"
    path.write_text(text)
    with pytest.raises(UsageError) as e:
        Journal(path).entries()
    assert e.value.file == str(path)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("journal.json.damaged-")]
    assert len(aside) == 1
    assert aside[0].read_text() == text  # kept for the operator, as it was
    assert str(aside[0]) in str(e.value)
    assert not path.exists()  # the next run starts from an empty journal


@pytest.mark.parametrize("text", DAMAGED.values(), ids=DAMAGED.keys())
def test_recover_on_a_damaged_journal_exits_2_with_one_line(tmp_path, text, capsys):
    path = tmp_path / "journal.json"
    path.write_text(text)
    r = llmchaos(capsys, "faults", "recover", "--journal", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "damaged" in r.stderr


def test_an_unwritable_journal_is_refused_up_front(tmp_path):
    (tmp_path / "file").write_text("")
    journal = Journal(tmp_path / "file" / "journal.json")  # its directory cannot exist
    with pytest.raises(UsageError) as e:
        journal.check_writable()
    assert e.value.file == str(tmp_path / "file" / "journal.json")


def test_entries_of_a_missing_journal_are_none(tmp_path):
    assert Journal(Path(tmp_path) / "none.json").entries() == []


def test_the_history_says_what_happened_and_why(tmp_path):
    j = Journal(tmp_path / "journal.json")
    lease = {"session": "s", "window": "slow#0"}
    entry = j.add("slow", "gpu_clock", {"gpu": 0}, {"graphics_mhz": 660}, {}, lease=lease)
    assert j.entries()[0]["lease"] == {"session": "s", "window": "slow#0"}
    j.note("reverted", "slow", "lease expired: no renewal from the master for 3.0 s", window="slow#0")
    j.remove(entry)
    (note,) = j.notes()
    assert (note["event"], note["name"], note["window"]) == ("reverted", "slow", "slow#0")
    assert note["why"].startswith("lease expired")
    assert (tmp_path / "journal.history.jsonl").exists()
