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


ENDING = {
    "target": "http://synthetic/", "lang": "en", "api": "openai-chat", "phase": "partition", "requests": 4,
    "stranded": 1, "failed_over": 0, "silent_max_s": 300.0, "replicas": {"1": {"requests": 4, "failed": 3}},
    "kv": {"timed_out": {"requests": 1, "ttft_p50_s": None, "end_p50_s": 300.0, "end_max_s": 300.0,
                         "silent_max_s": 300.0}},
}  # fmt: skip


def with_ending(copy: Path, **change: object) -> None:
    edit(copy / "run.json", lambda doc: doc.update(endings=[ENDING | change]))


def test_an_endings_row_reads_back(copy):
    with_ending(copy)
    ending = run.load(copy).run.endings[0]
    assert (ending.replicas["1"].failed, ending.kv["timed_out"].end_max_s) == (3, 300.0)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"stranded": 5}, "endings.0: Value error, stranded: 5 of 4 requests"),
        ({"silent_max_s": -1.0}, "endings.0.silent_max_s: Input should be greater than or equal to 0"),
        ({"replicas": {"1": {"requests": 2, "failed": 3}}},
         "endings.0.replicas.1: Value error, failed 3 of 2 requests"),
        ({"replicas": {"1": {"requests": 9, "failed": 0}}}, "endings.0: Value error, replicas: 9 of 4 requests"),
        ({"kv": {"hung": {"requests": 1}}}, "endings.0.kv.hung.[key]: Value error, a KV way must be one of pulled, "
         "recomputed, failed, timed_out, got 'hung'"),
        ({"kv": {"failed": {"requests": 1, "end_max_s": "soon"}}}, "endings.0.kv.failed.end_max_s: Input should be "
         "a valid number, unable to parse string as a number"),
        ({"requests": None}, "endings.0.requests: Input should be a valid integer"),
    ],
)  # fmt: skip
def test_a_bad_endings_row_is_one_line_naming_its_field(copy, change, said):
    with_ending(copy, **change)
    assert refused(copy) == f"{copy}/run.json: {said}"


def test_an_endings_row_twice_is_refused(copy):
    edit(copy / "run.json", lambda doc: doc.update(endings=[ENDING, ENDING]))
    assert "endings: a second row of http://synthetic//en/openai-chat/partition twice" in refused(copy)
