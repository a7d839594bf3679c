"""The stack's state directory: what `up` started (name, command, PID and its start time, URL, log)
in `state.json`, so `down` stops exactly those processes and `status` says what runs where."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from llmchaos.errors import UsageError

STATE = "state.json"
STOP_WAIT_S = 15.0


@dataclass
class Service:
    name: str
    cmd: list[str]
    url: str = ""  # where it answers ("" for a worker)
    ready: str = ""  # URL that answers 200 once it is up
    env: dict[str, str] = field(default_factory=dict)
    pid: int = 0
    started: float = 0.0  # the process's create time, so a reused PID is never signalled
    log: str = ""

    def process(self) -> psutil.Process | None:
        """This service's process while it runs (not a later one that reuses its PID)."""
        try:
            p = psutil.Process(self.pid)
            return p if abs(p.create_time() - self.started) < 0.01 and p.status() != psutil.STATUS_ZOMBIE else None
        except psutil.Error:
            return None

    def listens(self) -> bool:
        """Its own process (or one it started) listens on its URL's port: what answers there is this
        service, not another program that held the port first."""
        port, proc = urlsplit(self.url).port, self.process()
        if port is None or proc is None:
            return False
        try:
            family = [proc, *proc.children(recursive=True)]
            return any(
                c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                for p in family
                for c in p.net_connections(kind="inet")
            )
        except psutil.Error:
            return False


@dataclass
class Stack:
    """The services of one state directory, in start order."""

    root: Path
    services: list[Service] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, root: Path) -> Stack:
        path = root / STATE
        if not path.is_file():
            return cls(root)
        try:
            data = json.loads(path.read_text())
            return cls(root, [Service(**s) for s in data["services"]], data.get("notes", []))
        except (ValueError, KeyError, TypeError) as e:
            raise UsageError(f"not a stack's state: {e}", file=str(path)) from None

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data = {"services": [asdict(s) for s in self.services], "notes": self.notes}
        tmp = self.root / (STATE + ".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.root / STATE)

    def running(self) -> list[Service]:
        return [s for s in self.services if s.process() is not None]

    def start(self, service: Service, cwd: Path) -> None:
        """Start `service` in its own session (it outlives this command), logging to the state dir,
        and record it at once (a failure later still stops it)."""
        logs = self.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        service.log = str(logs / f"{service.name}.log")
        with open(service.log, "ab") as log:
            proc = subprocess.Popen(
                service.cmd,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **service.env},
            )
        service.pid, service.started = proc.pid, psutil.Process(proc.pid).create_time()
        self.services.append(service)
        self.save()

    def stop(self) -> list[str]:
        """SIGTERM every recorded process still running, last started first, then SIGKILL what is left
        after `STOP_WAIT_S`; forget them. The names stopped."""
        procs = [(s.name, p) for s in reversed(self.services) if (p := s.process()) is not None]
        for _, p in procs:
            _signal(p, signal.SIGTERM)
            _, alive = psutil.wait_procs([p], timeout=STOP_WAIT_S if p.name().startswith("locust") else 5.0)
            for q in alive:
                _signal(q, signal.SIGKILL)
        psutil.wait_procs([p for _, p in procs], timeout=5.0)
        (self.root / STATE).unlink(missing_ok=True)
        self.services, self.notes = [], []
        return [name for name, _ in procs]


def _signal(p: psutil.Process, sig: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        p.send_signal(sig)


def wait_ready(service: Service, timeout: float, probe: Callable[[Service], bool]) -> str | None:
    """None once `probe(service)` holds, else why not (the process exited, or the time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.process() is None:
            return f"{service.name} exited; its log ({service.log}) ends:\n{_tail(service.log)}"
        if probe(service):
            return None
        time.sleep(0.2)
    return f"{service.name} not ready in {timeout:.0f} s; its log ({service.log}) ends:\n{_tail(service.log)}"


def _tail(path: str, lines: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
