"""The kernel lab: a real Linux kernel for the tests that need what the host's lacks (sch_netem, sch_prio).

`run` boots a Linux 6.1 on the host's own root filesystem (so the guest runs this repo's code with the
host's Python and .venv), loads the network modules with `insmod` (Debian `kmod`), runs one shell
command in the guest from the repo's root, and powers off. The command's stdout, stderr and exit
status come back, with the kernel's console for a failure's message. Two routes, one init script:

- `uml`: Debian's `user-mode-linux`, a kernel that runs as an ordinary process, on hostfs. One CPU.
- `qemu` (qemu_lab.py): Debian's generic kernel under QEMU's TCG, the host's root read-only over
  virtio-9p; for CPUs where user-mode Linux's init dies (it does with AMX). One CPU, a slower boot.

The route is `uml` where a probe boot of it runs `true` (the verdict is cached, see `route`), else
`qemu`; `LLMCHAOS_LAB=uml|qemu` forces one. 1 GiB either way.

The guest shares the host's files: it gets a tmpfs of its own on /run (its network namespaces) and
a state directory (the fault journal's default) under the run's `workdir`, which must be a path of
this run's own; anything else a command writes, it writes on the host (on `qemu`, only `workdir` is
writable, and /tmp is the guest's). A boot that outlives its `timeout` (plus its route's allowance)
is killed with every process it started (its own process group), so none is left behind.

    lab = kernel_lab.run(f"{sys.executable} -m tests.system.lab_probe spec.json", tmp_path)
    assert lab.returncode == 0, lab.failure()
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.procs import ROOT
from tests.system import qemu_lab

UML = "linux.uml"
MODULE_ROOT = Path("/usr/lib/uml/modules")
NET_MODULES = ("ipv6", "veth", "ifb", "sch_netem", "sch_tbf", "sch_prio", "sch_ingress", "cls_u32", "act_mirred")
POWER_OFF = f"{shlex.quote(sys.executable)} -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321FEDC)'"  # RB_POWER_OFF
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmchaos-lab"


@dataclass
class LabRun:
    returncode: int | None  # the command's exit status; None when it never finished (timeout, kernel panic)
    stdout: str
    stderr: str
    console: str  # the kernel's own console (boot messages, a panic)
    kernel: str  # the guest kernel's release (`uname -r`)
    timed_out: bool

    def failure(self) -> str:
        """What a failed assertion should show: the command's output, then the end of the console."""
        console = "\n".join(self.console.splitlines()[-30:])
        return f"exit {self.returncode} (timed out: {self.timed_out})\n{self.stdout}\n{self.stderr}\n--\n{console}"


def _first_in_line(policy: int, priority: int) -> None:
    """The guest's clock is the host's: a kernel left waiting for a CPU shows as network delay (on a
    busy host 4 % of the seed drill's packets came up to 45 ms past its 130 ms bound at nice 0, some
    at nice -20, none at SCHED_FIFO), so the kernel runs first in line, at its route's real-time
    policy. The host's real-time throttling leaves 5 % of each CPU to others even when it is busy."""
    try:
        os.sched_setscheduler(0, policy, os.sched_param(priority))
    except OSError:
        with contextlib.suppress(OSError):
            os.nice(-20)


def module_dir() -> Path | None:
    """user-mode-linux's module tree for the one kernel it ships."""
    found = sorted(MODULE_ROOT.glob("*/modules.dep")) if MODULE_ROOT.is_dir() else []
    return found[-1].parent if found else None


@dataclass(frozen=True)
class Route:
    name: str
    boot_s: float  # what its boot adds to a command's timeout
    pace: float  # how many times longer a command takes in its guest than in user-mode Linux's
    modules: Callable[[], Path]  # its kernel's module tree
    command: Callable[[Path, Path, str], list[str]]  # (workdir, init, mem): the boot's command line
    realtime: tuple[int, int]  # its process's scheduling policy and priority (_first_in_line)

    def allowed(self, timeout: float) -> float:
        """How long a boot that runs a command of `timeout` seconds (in user-mode Linux) is given."""
        return self.boot_s + self.pace * timeout


def _uml_command(workdir: Path, init: Path, mem: str) -> list[str]:
    return [
        *[UML, f"mem={mem}", "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "rw", f"init={init}"],
        *["quiet", "con=null", "con0=null,fd:1", f"uml_dir={workdir}", "umid=lab"],
    ]


def _uml_modules() -> Path:
    found = module_dir()
    assert found is not None
    return found


def _qemu_modules() -> Path:
    return qemu_lab.module_dir(qemu_lab.kernel(CACHE))


def _qemu_command(workdir: Path, init: Path, mem: str) -> list[str]:
    boot = load_order(qemu_lab.BOOT_MODULES, _qemu_modules())
    return qemu_lab.command(qemu_lab.kernel(CACHE), boot, workdir, init, mem)


ROUTES = {
    # one process, one CPU at most (the end-to-end drill keeps it busy for tens of seconds)
    "uml": Route("uml", 0.0, 1.0, _uml_modules, _uml_command, (os.SCHED_FIFO, 10)),
    # round robin: QEMU's CPU threads share the host's CPUs with its I/O thread (SCHED_FIFO starved
    # it: a boot that never reached init in 5 minutes)
    "qemu": Route("qemu", 60.0, 3.0, _qemu_modules, _qemu_command, (os.SCHED_RR, 1)),
}


@functools.cache
def route() -> Route:
    """`LLMCHAOS_LAB`'s route, else `uml` where its init starts, else `qemu`. The probe boot's verdict
    is kept in CACHE keyed by the CPU's flags and the user-mode kernel's file (what decides it), so a
    machine boots it once, not once per test run; a lock makes pytest-xdist's workers wait for one
    probe. A probe that timed out is not kept (a busy host, not a verdict)."""
    forced = os.environ.get("LLMCHAOS_LAB")
    if forced:
        if forced not in ROUTES:
            raise ValueError(f"LLMCHAOS_LAB={forced}: not one of {sorted(ROUTES)}")
        return ROUTES[forced]
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    uml = os.stat(shutil.which(UML) or UML)
    key = hashlib.sha256(f"{flags}\n{uml.st_size} {uml.st_mtime_ns}".encode()).hexdigest()[:16]
    verdict = CACHE / f"uml-{key}"
    with qemu_lab.locked(CACHE / "uml.lock"):
        if not verdict.exists():
            with tempfile.TemporaryDirectory(dir=CACHE) as workdir:
                probe = _boot(ROUTES["uml"], "true", Path(workdir), 60.0, (), {}, "256M")
            if probe.timed_out:
                return ROUTES["qemu"]
            verdict.write_text("boots" if probe.returncode == 0 else f"init dies:\n{probe.console[-2000:]}")
        return ROUTES["uml" if verdict.read_text() == "boots" else "qemu"]


def unavailable(via: str | None = None) -> str | None:
    """Why the lab cannot boot here (not root, or a package `make debian-deps` installs is missing),
    or None; `via` names a route, else `route()`'s. Any other reason it does not boot is a failure,
    with the console, of `run`."""
    if os.geteuid() != 0:
        return "the kernel lab needs root (its guest writes the host's files as this user)"
    if shutil.which("insmod") is None:
        return "no insmod: apt-get install kmod (make debian-deps)"
    if (via or os.environ.get("LLMCHAOS_LAB")) != "qemu" and (shutil.which(UML) is None or module_dir() is None):
        return "no user-mode kernel: apt-get install user-mode-linux (make debian-deps)"
    if (via or route().name) == "qemu" and (shutil.which(qemu_lab.QEMU) is None or not qemu_lab.BUSYBOX.exists()):
        return "no QEMU: apt-get install qemu-system-x86 busybox-static (make debian-deps)"
    return None


def load_order(names: tuple[str, ...], base: Path) -> list[str]:
    """The module files of the tree `base` to insmod for `names`, each after the modules it depends on
    (modules.dep); a module built into the kernel needs none."""
    deps: dict[str, list[str]] = {}
    for line in (base / "modules.dep").read_text().splitlines():
        path, _, needs = line.partition(":")
        deps[Path(path).name.removesuffix(".ko").replace("-", "_")] = [path, *needs.split()]
    builtin = {Path(p).name.removesuffix(".ko") for p in (base / "modules.builtin").read_text().split()}
    by_path = {v[0]: k for k, v in deps.items()}
    order: list[str] = []

    def add(name: str) -> None:
        if name in builtin:
            return
        if name not in deps:
            raise ValueError(f"the lab's kernel ships no module {name}")
        for need in reversed(deps[name][1:]):
            add(by_path[need])
        if str(base / deps[name][0]) not in order:
            order.append(str(base / deps[name][0]))

    for name in names:
        add(name)
    return order


def _init(workdir: Path, command: str, modules: list[str], env: dict[str, str]) -> Path:
    """The guest's init: mounts, modules, loopback up, the command with its output in `workdir`, power off."""
    q = shlex.quote
    exports = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(workdir),
        "XDG_STATE_HOME": str(workdir / "state"),
        "TMPDIR": str(workdir),
        "PYTHONDONTWRITEBYTECODE": "1",
        **env,
    }
    lines = [
        "#!/bin/sh",
        "mount -t proc proc /proc && mount -t sysfs sysfs /sys && mount -t tmpfs tmpfs /run",
        "mkdir -p /run/netns",
        *(f"insmod {q(m)} || echo 'lab: insmod {m} failed'" for m in modules),
        "ip link set lo up",
        *(f"export {k}={q(v)}" for k, v in exports.items()),
        f"cd {q(ROOT)}",
        f"uname -r > {q(str(workdir / 'kernel'))}",
        f"( {command} ) > {q(str(workdir / 'stdout'))} 2> {q(str(workdir / 'stderr'))} < /dev/null",
        f"echo $? > {q(str(workdir / 'status'))}",
        "sync",
        POWER_OFF,
    ]
    init = workdir / "init.sh"
    init.write_text("\n".join(lines) + "\n")
    init.chmod(0o755)
    return init


def run(
    command: str,
    workdir: Path,
    timeout: float = 120.0,
    modules: tuple[str, ...] = NET_MODULES,
    env: dict[str, str] | None = None,
    mem: str = "1024M",
    via: str | None = None,
) -> LabRun:
    """Boot the lab (the route `via` names, else `route()`'s), run `command` (a shell line) in it from
    the repo's root, and power off."""
    reason = unavailable(via)
    if reason:
        raise RuntimeError(reason)
    return _boot(ROUTES[via] if via else route(), command, workdir, timeout, modules, env or {}, mem)


def _boot(
    route: Route, command: str, workdir: Path, timeout: float, modules: tuple[str, ...], env: dict[str, str], mem: str
) -> LabRun:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "state").mkdir(exist_ok=True)
    for name in ("status", "stdout", "stderr", "kernel"):
        (workdir / name).unlink(missing_ok=True)
    init = _init(workdir, command, load_order(modules, route.modules()), env)
    args = route.command(workdir, init, mem)
    timed_out = False
    with open(workdir / "console", "wb") as console:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the kernel and every process it forks
            preexec_fn=functools.partial(_first_in_line, *route.realtime),
            env={**os.environ, "TMPDIR": str(workdir)},  # user-mode Linux's memory file
        )
        try:
            proc.wait(route.allowed(timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _end_group(proc)

    def read(name: str) -> str:
        path = workdir / name
        return path.read_text(errors="replace") if path.exists() else ""

    status = read("status").strip()
    return LabRun(
        int(status) if status.isdigit() else None,
        read("stdout"),
        read("stderr"),
        read("console"),
        read("kernel").strip(),
        timed_out,
    )


def _end_group(proc: subprocess.Popen) -> None:
    """End the kernel if it still runs (SIGTERM: it halts and reaps its helpers itself; then SIGKILL to
    its whole process group) and wait until nothing of the group runs."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while left := [
        p for p in psutil.process_iter(["status"]) if _pgid(p) == proc.pid and p.info["status"] != psutil.STATUS_ZOMBIE
    ]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the kernel lab left processes behind: {[p.pid for p in left]}")
        time.sleep(0.05)


def _pgid(p: psutil.Process) -> int | None:
    try:
        return os.getpgid(p.pid)
    except OSError:
        return None
