"""The stack's state: a file not ours is refused; `status` and `down` without a stack. That a recorded
process is signalled only while it is the one `up` started: tests/integration/test_stack_state.py."""

import pytest

from compose.state import Stack
from llmchaos.errors import UsageError
from tests.inprocess import llmchaos


def test_a_state_file_that_is_not_ours_is_one_line_naming_it(tmp_path):
    (tmp_path / "state.json").write_text("{}")
    with pytest.raises(UsageError, match=r"state\.json: not a stack's state"):
        Stack.load(tmp_path)


def test_status_and_down_without_a_stack(tmp_path, capsys):
    for verb in ("status", "down"):
        r = llmchaos(capsys, "stack", verb, "--state-dir", str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert str(tmp_path) in r.stdout
