"""The stack's state with real processes: a recorded process is signalled only while it is the one `up`
started (the state file's reading and the commands without a stack: tests/unit/compose/test_state.py)."""

import sys

from compose.state import Service, Stack


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
