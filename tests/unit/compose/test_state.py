"""The stack's state: a recorded process is signalled only while it is the one `up` started."""

import subprocess
import sys

import pytest

from compose.state import Service, Stack
from llmchaos.errors import UsageError


def test_down_stops_what_up_started_and_never_a_reused_pid(tmp_path):
    stack = Stack(tmp_path)
    stack.start(Service("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"]), tmp_path)
    (s,) = Stack.load(tmp_path).services
    assert s.process() is not None
    impostor = Service("other", [], pid=s.pid, started=s.started - 5.0)  # same PID, another process
    assert impostor.process() is None
    assert Stack.load(tmp_path).stop() == ["sleeper"]
    assert s.process() is None
    assert Stack.load(tmp_path).services == []


def test_a_state_file_that_is_not_ours_is_one_line_naming_it(tmp_path):
    (tmp_path / "state.json").write_text("{}")
    with pytest.raises(UsageError, match=r"state\.json: not a stack's state"):
        Stack.load(tmp_path)


def test_status_and_down_without_a_stack(tmp_path):
    for verb in ("status", "down"):
        r = subprocess.run(
            [sys.executable, "-m", "llmchaos.cli", "stack", verb, "--state-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert str(tmp_path) in r.stdout
