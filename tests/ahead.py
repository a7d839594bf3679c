"""Run a timing test ahead of the other tests running meanwhile: its worker (and every process it
starts, in whatever session) moves into a cpu cgroup of the highest weight for the test's duration.

A cgroup, not nice: the kernel groups each session (`setsid`: the servers that `stack up` starts)
into an autogroup of its own, and a nice value counts only inside its autogroup; inside a cgroup
other than the root, autogroups do not apply. The other tests get the CPU the timing test leaves.
A dockerd started there puts its containers there too (`cgroup()`: its --cgroup-parent).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

V1, V2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
PREFIX = "llmchaos-timing-"


def controller() -> tuple[Path, str, int] | None:
    """The cpu controller's root, its weight file and the highest weight (cgroup v1, else v2); None
    where there is none (make test's summary says so: the timing tests then compete with the rest)."""
    if (V1 / "cpu.shares").exists():
        return V1, "cpu.shares", 262144
    control = V2 / "cgroup.subtree_control"
    if control.exists() and "cpu" in control.read_text().split():
        return V2, "cpu.weight", 10000
    return None


def _rmdirs(name: str) -> None:
    """Remove the cgroup `name` (v2), or in every controller (v1: one tree each), innermost first."""
    for made in [*V2.glob(name), *V2.glob(f"*/{name}")]:
        for path in sorted(made.glob("**/"), key=lambda p: len(p.parts), reverse=True):
            path.rmdir()


def _sweep() -> None:
    """Remove what a worker killed half-way (kill -9) left: the cgroups of processes that are gone."""
    for made in {p.name for p in [*V2.glob(f"{PREFIX}*"), *V2.glob(f"*/{PREFIX}*")]}:
        pid = made.removeprefix(PREFIX).split("-")[0]
        if not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):  # a process still in it: left to whoever started it
                _rmdirs(made)


def cgroup() -> str | None:
    """The cgroup this process runs ahead in, from its controller's root (a dockerd's --cgroup-parent)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            cpu = not controllers or "cpu" in controllers.split(",")  # v2's one hierarchy, or v1's cpu
            if cpu and path.startswith(f"/{PREFIX}"):
                return path
    return None


class Ahead:
    """This process's cgroup of the highest CPU weight, made on first use and removed by `remove`."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.root = Path()

    def _made(self) -> Path | None:
        if self.path is None and (found := controller()):
            _sweep()
            self.root, weight, highest = found
            path = self.root / f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
            path.mkdir()
            (path / weight).write_text(str(highest))
            self.path = path
        return self.path

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """This process, and what it starts meanwhile, ahead of the rest until the block ends (where
        there is a cpu controller)."""
        if (path := self._made()) is None:
            yield
            return
        (path / "cgroup.procs").write_text(str(os.getpid()))
        try:
            yield
        finally:
            (self.root / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        """Remove the cgroup, first moving back any process a test left in it, and what a dockerd made
        under its name (in each v1 controller: its containers' cgroups are gone with the containers)."""
        if self.path is None:
            return
        for pid in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):  # gone since the read
                (self.root / "cgroup.procs").write_text(pid)
        _rmdirs(self.path.name)
        self.path = None
