"""Sample schedules and their loader, shared by test_schedule, test_cli and injectors/test_docker."""

from pathlib import Path

import pytest

from faults import schedule
from faults.injectors import KINDS
from llmchaos.errors import UsageError

GOOD = """seed: 7
faults:
  - name: drop
    kind: sse
    target: {proxy: "127.0.0.1:9100"}
    at: 2s
    duration: 1s
    every: 5s
    params: {drop_ratio: 0.15}
  - name: slow-gpu
    kind: gpu_clock
    target: {sim: "http://127.0.0.1:8000"}
    at: 500ms
    duration: 3s
    params: {graphics_mhz: 660}
"""


def load(tmp_path: Path, text: str) -> schedule.Schedule:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return schedule.load(str(p), KINDS)


def assert_rejected(tmp_path: Path, text: str, message: str) -> None:
    """`text` does not load, with an error that names the file, line and field as `message` does."""
    with pytest.raises(UsageError) as e:
        load(tmp_path, text)
    assert str(e.value).startswith(str(tmp_path / "s.yaml") + message.split(" ")[0]), str(e.value)
    assert message.split(": ", 1)[1] in str(e.value)
