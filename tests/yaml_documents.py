"""Hypothesis strategies for YAML user files: documents of the shape the loaders expect, nearly
right ones, and any text; and the property every loader of a user file keeps."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import yaml
from hypothesis import strategies as st

from llmchaos.errors import UsageError

WORDS = [
    "stages", "ramp", "duration", "users", "rate", "spawn_rate", "en", "de", "ja", "xx",
    "ttft_p99_ms", "itl_p50_ms", "e2e_p99.9_ms", "ttft_p99", "colour",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10, max_value=10**6),
    st.floats(),
    st.sampled_from(["10s", "2m", "500ms", "-1s", "abc", "", "1e400"]),
    st.text(max_size=5),
)
DATA = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)
ODD = [
    "? []\n: 1\n",  # a key that is no word
    "!foo 1\n",  # a tag the safe loader does not know
    "a: &x 1\nb: *x\n",
    "---\na: 1\n---\nb: 2\n",  # two documents
    "\x1f",  # a character YAML does not allow
    "{[1]: 2}\n",
]
DOCUMENTS = st.one_of(
    DATA.map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
    st.text(max_size=80),
    st.sampled_from(ODD),
    st.tuples(st.sampled_from(ODD), DATA.map(yaml.safe_dump)).map("".join),
)


def load_text(load: Callable[[str], object], text: str) -> object | UsageError:
    """`load` of a file holding `text`: its result, or the UsageError it raised, which must name the
    file and a line (any other exception propagates)."""
    fd, path = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            return load(path)
        except UsageError as e:
            error = e
    finally:
        os.unlink(path)
    assert (error.file, error.line is not None and error.line >= 1) == (path, True), str(error)
    assert "\n" not in str(error)
    return error
