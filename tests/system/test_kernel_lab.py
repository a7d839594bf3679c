"""The kernel lab itself: a command's output and exit status come back, a boot that outlives its
timeout is ended with every process it started, and modules load after those they depend on."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tests.system import kernel_lab

pytestmark = pytest.mark.skipif(kernel_lab.unavailable() is not None, reason=str(kernel_lab.unavailable()))


def running_in(workdir: Path) -> list[int]:
    """The user-mode kernel's processes of the lab in `workdir` (its command line names it)."""
    return [
        p.pid
        for p in psutil.process_iter(["cmdline", "status"])
        if f"uml_dir={workdir}" in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


def test_a_command_runs_in_the_lab_and_its_output_and_status_come_back(tmp_path):
    lab = kernel_lab.run("echo out; echo err >&2; lsmod | grep -c sch_netem; exit 3", tmp_path, timeout=60)
    assert (lab.returncode, lab.timed_out) == (3, False), lab.failure()
    assert lab.stdout == "out\n1\n"
    assert lab.stderr == "err\n"
    assert lab.kernel.startswith("6."), lab.kernel


def test_a_lab_past_its_timeout_is_ended_with_every_process_it_started(tmp_path):
    t = time.monotonic()
    lab = kernel_lab.run("sleep 600", tmp_path, timeout=5)
    assert (lab.returncode, lab.timed_out) == (None, True)
    assert time.monotonic() - t < 20
    assert running_in(tmp_path) == []


def test_modules_load_after_the_ones_they_need():
    order = [path.rsplit("/", 1)[-1] for path in kernel_lab.load_order(("ipv6", "sch_netem"))]
    assert order.index("crc-ccitt.ko") < order.index("ipv6.ko")
    with pytest.raises(ValueError, match="no module sch_nonesuch"):
        kernel_lab.load_order(("sch_nonesuch",))
