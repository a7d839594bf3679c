"""LLMCHAOS_PLANE picks the data plane; https always reads on the Python one; a value naming no
plane is the user's error, one line naming the variable."""

from __future__ import annotations

import pytest

from llmchaos.errors import UsageError
from loadtests import dataplane
from loadtests.dataplane import native


@pytest.mark.parametrize("asked", ["", "native", "python"])
def test_http_reads_on_the_plane_asked_for_and_https_on_python(monkeypatch, asked):
    if asked == "native" and not native.available():
        pytest.fail("the native plane is not built (make install builds it)")
    monkeypatch.setenv("LLMCHAOS_PLANE", asked)
    want = asked or ("native" if native.available() else "python")
    assert dataplane.choose(https=False) == want
    assert dataplane.choose(https=True) == "python"
    assert {want, "python"} <= dataplane.used


def test_a_plane_that_does_not_exist_is_named_in_one_line(monkeypatch):
    monkeypatch.setenv("LLMCHAOS_PLANE", "rust")
    with pytest.raises(UsageError) as e:
        dataplane.choose(https=False)
    assert str(e.value) == "LLMCHAOS_PLANE: 'rust' is not one of native, python"
