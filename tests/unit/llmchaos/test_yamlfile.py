"""Every YAML config (schedules, SLOs, guard files, rules) is read through one door: a pipe, a
device or a file too large is one line naming the file, never a wait or a read without end."""

import os

import pytest

from llmchaos import yamlfile
from llmchaos.errors import UsageError


def refused(path) -> str:
    with pytest.raises(UsageError) as e:
        yamlfile.compose(str(path))
    return str(e.value)


def test_a_pipe_or_a_device_is_refused_at_once(tmp_path):
    fifo = tmp_path / "slo.yaml"
    os.mkfifo(fifo)  # nobody writes: reading it would wait for ever
    assert refused(fifo) == f"{fifo}: not a regular file (a pipe or a device is no config)"
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")  # reading it would never end
    assert refused(link) == f"{link}: not a regular file (a pipe or a device is no config)"


def test_a_file_too_large_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(yamlfile.MAX_BYTES + 1)
    assert refused(big) == f"{big}: {yamlfile.MAX_BYTES + 1:,} bytes, over the 16 MiB a config may have"


def test_a_link_to_a_config_reads_as_the_config(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_text("en: {ttft_p99_ms: 90}\n")
    (tmp_path / "link.yaml").symlink_to(real)
    assert yamlfile.value(yamlfile.compose(str(tmp_path / "link.yaml"))) == {"en": {"ttft_p99_ms": 90}}
