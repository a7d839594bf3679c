"""A results directory crafted to hurt its reader: a link to /dev/zero, a FIFO, an index naming a file
outside, a negative count, a NaN sum, a sum its counts cannot have, a histogram twice. Each is one
line naming the file (and field), never a traceback, a hang or memory without bound."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks._synthetic_run import write
from llmchaos import run
from llmchaos.errors import UsageError


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("runs") / "r", 200, seed=1)


@pytest.fixture
def copy(made: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(made, tmp_path / "r"))


def edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def refused(directory: Path) -> str:
    with pytest.raises(UsageError) as e:
        run.load(directory)
    message = str(e.value)
    assert "\n" not in message
    return message


@pytest.mark.timeout(30)
def test_run_json_linked_to_dev_zero_is_refused(copy):
    (copy / "run.json").unlink()
    (copy / "run.json").symlink_to("/dev/zero")
    assert refused(copy) == f"{copy}/run.json: outside the results directory"


@pytest.mark.timeout(30)
def test_an_index_that_is_a_fifo_is_refused_not_waited_on(copy):
    (copy / "histograms" / "index.json").unlink()
    os.mkfifo(copy / "histograms" / "index.json")
    assert refused(copy) == f"{copy}/histograms/index.json: not a regular file"


def test_an_index_naming_a_file_outside_is_refused(copy):
    edit(copy / "histograms" / "index.json", lambda doc: doc[0].update(file="../../../../../../etc/passwd"))
    assert refused(copy) == (
        f"{copy}/histograms/index.json: [0].file: not a file of histograms/: '../../../../../../etc/passwd'"
    )
    link = copy / "histograms" / "0000.hdr"
    link.unlink()
    link.symlink_to("/etc/passwd")
    edit(copy / "histograms" / "index.json", lambda doc: doc[0].update(file="0000.hdr"))
    assert refused(copy) == f"{link}: outside the results directory"


def test_a_file_larger_than_any_run_writes_is_refused(copy):
    with open(copy / "run.json", "ab") as f:
        f.truncate(run.store.MAX_BYTES["run.json"] + 1)
    assert refused(copy).endswith("run.json: larger than a results directory's file may be (67108864 bytes)")


def test_negative_counts_and_nan_figures_are_refused(copy):
    edit(copy / "run.json", lambda doc: doc["outcomes"][0].update(count=-9))
    assert refused(copy) == f"{copy}/run.json: outcomes.0.count: Input should be greater than or equal to 0"
    shutil.copy(copy / "run.json", copy / "good.json")
    text = (copy / "run.json").read_text().replace('"count": -9', '"count": 9')
    (copy / "run.json").write_text(text.replace('"duration_s": ', '"duration_s": NaN, "x": ', 1))
    assert "run.json: duration_s: Input should be a finite number" in refused(copy)


def test_a_nan_sum_or_one_its_counts_cannot_have_is_refused(copy):
    index = copy / "histograms" / "index.json"
    original = index.read_text()
    index.write_text(original.replace('"sum": ', '"sum": NaN, "was": ', 1))
    assert "sum: must be a finite number >= 0, got nan" in refused(copy)
    edit(index, lambda doc: doc[0].update(sum=json.loads(original)[0]["sum"] * 1000))
    assert refused(copy).startswith(f"{copy}/histograms/0000.hdr: not an HDR histogram of ours: sum: ")


def test_a_histogram_twice_is_refused(copy):
    index = copy / "histograms" / "index.json"
    edit(index, lambda doc: doc.append(dict(doc[0])))
    n = len(json.loads(index.read_text())) - 1
    assert refused(copy).startswith(f"{index}: [{n}]: a second histogram for http://synthetic/")


def test_a_summary_or_an_outcome_twice_is_refused(copy):
    edit(copy / "run.json", lambda doc: doc["outcomes"].append(doc["outcomes"][0]))
    assert "outcomes: a second count of http://synthetic/" in refused(copy)


def test_an_intact_copy_still_reads(copy):
    assert run.load(copy).run.run_id == "r"
