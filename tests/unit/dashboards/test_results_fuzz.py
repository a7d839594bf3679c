"""Any JSON in a results directory's run.json and histograms/index.json (a whole document, or a real
one with any of its values replaced by any JSON): `report` and `regress --history` (compare's
statistics against a baseline, and the history's series) give a result, or one line and exit status
2; never a traceback or a hang."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks._synthetic_run import write
from llmchaos.cli import main

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
FILES = ("run.json", "histograms/index.json")


@pytest.fixture(scope="module")
def made() -> tuple[Path, Path]:
    root = Path(tempfile.mkdtemp(prefix="llmchaos-fuzz-"))
    try:
        yield write(root / "a", 120, seed=1), write(root / "b", 120, seed=2)
    finally:
        shutil.rmtree(root)


def paths(doc: object, at: tuple = ()) -> list[tuple]:
    """Every place in a JSON document, its root first."""
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, (*at, i))
    return out


def replaced(doc: object, at: tuple, value: object) -> object:
    if not at:
        return value
    doc[at[0]] = replaced(doc[at[0]], at[1:], value)  # type: ignore[index]
    return doc


def judged(*argv: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    assert status in (0, 1, 2), err.getvalue()
    if status == 2:
        assert err.getvalue().count("\n") == 1, err.getvalue()
        assert err.getvalue().startswith("llmchaos: error: "), err.getvalue()


@pytest.mark.fuzz
@given(data=st.data(), file=st.sampled_from(FILES), whole=st.booleans())
def test_any_json_in_run_json_or_the_index_is_a_result_or_one_line_and_exit_2(made, data, file, whole):
    a, b = made
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        copy = shutil.copytree(b, runs / "b")
        doc = json.loads((copy / file).read_text())
        for _ in range(1 if whole else data.draw(st.integers(1, 3))):
            where = () if whole else data.draw(st.sampled_from(paths(doc)))
            doc = replaced(doc, where, data.draw(JSON))
        (copy / file).write_text(json.dumps(doc))
        judged("report", str(copy))
        judged("regress", "--baseline", str(a), "--current", str(copy), "--history", str(runs), "--resamples", "20")
