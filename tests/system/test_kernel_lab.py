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
    """The kernel's processes of the lab in `workdir` (their command line names it, on either route)."""
    return [
        p.pid
        for p in psutil.process_iter(["cmdline", "status"])
        if any(str(workdir) in arg for arg in p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE
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
    assert time.monotonic() - t < kernel_lab.route().allowed(5) + 15
    assert running_in(tmp_path) == []


@pytest.mark.skipif(kernel_lab.unavailable("qemu") is not None, reason=str(kernel_lab.unavailable("qemu")))
def test_the_qemu_route_boots_and_loads_sch_netem(tmp_path):
    """The route for CPUs where user-mode Linux's init dies, booted here too: where it starts, nothing
    else would. Slow for a unit of the lab (15 to 30 s): a kernel under TCG, its guest's Python slower."""
    t = time.monotonic()
    lab = kernel_lab.run("lsmod | grep -c sch_netem; cut -d' ' -f1 /proc/uptime", tmp_path, timeout=60, via="qemu")
    assert lab.returncode == 0, lab.failure()
    netem, booted = lab.stdout.split()
    print(f"\nqemu: kernel {lab.kernel}, command at {booted} s of uptime, {time.monotonic() - t:.1f} s in all")
    assert netem == "1"
    assert lab.kernel.endswith("-amd64"), lab.kernel


def test_modules_load_after_the_ones_they_need():
    uml = kernel_lab.module_dir()
    assert uml is not None
    order = [path.rsplit("/", 1)[-1] for path in kernel_lab.load_order(("ipv6", "sch_netem"), uml)]
    assert order.index("crc-ccitt.ko") < order.index("ipv6.ko")
    with pytest.raises(ValueError, match="no module sch_nonesuch"):
        kernel_lab.load_order(("sch_nonesuch",), uml)
