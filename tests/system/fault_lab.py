"""The fault host's lab: three namespaces as machines (three_hosts.py), and in them the processes of a
staging run: the reference server and a fault host on the GPU host, a Locust master and a worker
on the master's host, a worker on the client host. Every process is started by its command and
stopped by its own PID; `Watch` reads the GPU host's state (the root qdisc on the data path, the
simulated device's clocks) from inside it, as ground truth for what the fault host says it did."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
from pyroute2 import IPRoute, netns

from llmchaos.procs import stop
from tests.procs import ROOT
from tests.system.netns import in_netns
from tests.system.three_hosts import Lab, three_hosts

T = TypeVar("T")
TOKEN = "lab-admin-token"
PORT, BUS = 8000, 5557  # the server's port (G) and the master's (M): each namespace has its own ports
HOST = "gpu-node-1"
LOCUST = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py"]
LLMCHAOS = [sys.executable, "-m", "llmchaos.cli"]
SIM = f"http://127.0.0.1:{PORT}"  # the simulated device's admin API, as the fault host beside it sees it
ALLOW = ("--allow-interface", "g2c", "--allow-sim", SIM)  # the fault host's allowlist in these tests


def inside(ns: str, fn: Callable[[], T]) -> T:
    """`fn()` run by a thread of this process that entered namespace `ns` (setns is per thread)."""
    out: dict[str, T | BaseException] = {}

    def run() -> None:
        try:
            netns.setns(ns, flags=0)
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]  # type: ignore[return-value]


def clocks() -> dict:
    """The simulated device's clocks (call inside the GPU host)."""
    return httpx.get(SIM + "/admin/device/clocks", headers={"authorization": f"Bearer {TOKEN}"}, timeout=5).json()


def root_qdisc(interface: str) -> str | None:
    """The kind of `interface`'s root qdisc, None for the kernel's default (call inside its namespace)."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=interface)[0]
        roots = [q for q in ipr.get_qdiscs(index=index) if q["parent"] == 0xFFFFFFFF]
    kind = roots[0].get_attr("TCA_KIND") if roots else None
    return None if kind in (None, "noqueue", "pfifo_fast", "fq_codel", "mq", "fq") else kind


@dataclass
class Watch:
    """Every change of the GPU host's root qdisc on `interface` and of its simulated device's lock,
    each dated by the reads around it: (changed after the start of the last read of the old state,
    seen by the end of the first read of the new one, the new state)."""

    lab: Lab
    interface: str
    period_s: float = 0.005
    qdisc: list[tuple[float, float, str | None]] = field(default_factory=list)  # (before, after, kind)
    locked: list[tuple[float, float, bool]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Watch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(10)

    def _run(self) -> None:
        netns.setns(self.lab.gpu, flags=0)
        with IPRoute() as ipr, httpx.Client(timeout=5, headers={"authorization": f"Bearer {TOKEN}"}) as http:
            index = ipr.link_lookup(ifname=self.interface)[0]

            def qdisc() -> str | None:
                roots = [q.get_attr("TCA_KIND") for q in ipr.get_qdiscs(index=index) if q["parent"] == 0xFFFFFFFF]
                return roots[0] if roots and roots[0] == "tbf" else None

            def locked() -> bool:
                return bool(http.get(SIM + "/admin/device/clocks").json()["locked"])

            watched: list[tuple[Callable[[], object], list]] = [(qdisc, self.qdisc), (locked, self.locked)]
            last: list[object] = [None, None]
            since = [time.time()] * len(watched)  # when the read that saw the last state began
            while not self._stop.is_set():
                for i, (read, changes) in enumerate(watched):
                    start = time.time()
                    try:
                        state = read()
                    except httpx.HTTPError:
                        continue  # no reading this time: the last one stands
                    if state != last[i]:  # each read dated by its own start and end, not its neighbour's
                        changes.append((since[i], time.time(), state))
                        last[i] = state
                    since[i] = start
                time.sleep(self.period_s)

    @staticmethod
    def spans(changes: list[tuple[float, float, object]]) -> list[tuple[tuple[float, float], tuple[float, float]]]:
        """Each time the state was on: ((on after, seen on by), (off after, seen off by)), in order."""
        out, on = [], None
        for before, after, state in changes:
            if state and on is None:
                on = (before, after)
            elif not state and on is not None:
                out.append((on, (before, after)))
                on = None
        if on is not None:
            out.append((on, (float("inf"), float("inf"))))
        return out


@dataclass
class Procs:
    """The lab's processes by name, each with its log file; stopped by PID at the end."""

    tmp: Path
    running: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, name: str, ns: str, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - the child holds it; closed with the test's tmp
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=in_netns(ns),
            env={**os.environ, **(env or {})},
        )
        self.running[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in reversed(self.running.values()):
            stop(proc, timeout=15)


def secret_file(tmp: Path) -> Path:
    path = tmp / "fault-secret"
    path.write_text(os.urandom(24).hex() + "\n")
    path.chmod(0o600)
    return path


def server(procs: Procs, lab: Lab, *args: str) -> None:
    """The reference server on the GPU host (sim engine, its clock admin API on), ready."""
    cmd = [*LLMCHAOS, "serve", "--engine", "sim", "--host", "0.0.0.0", "--port", str(PORT), "--admin-token", TOKEN]
    procs.start("server", lab.gpu, [*cmd, *args])
    deadline = time.monotonic() + 120
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if inside(lab.gpu, lambda: httpx.get(f"http://127.0.0.1:{PORT}/healthz", timeout=2).status_code) == 200:
                return
        assert time.monotonic() < deadline, procs.log("server")
        assert procs.running["server"].poll() is None, procs.log("server")
        time.sleep(0.2)


def fault_host(procs: Procs, lab: Lab, secret: Path, journal: Path, *allow: str, name: str = "fault-host") -> None:
    cmd = [*LLMCHAOS, "faults", "host", "--master-host", lab.master_for_gpu, "--master-port", str(BUS)]
    cmd += ["--name", HOST, "--secret-file", str(secret), "--journal", str(journal), *allow]
    procs.start(name, lab.gpu, cmd, {"LLMCHAOS_ADMIN_TOKEN": TOKEN})


def load(procs: Procs, lab: Lab, secret: Path, schedule: Path, results: Path, seconds: int, *more: str) -> None:
    """A worker on the client host and one beside the master, then the master (headless)."""
    procs.start("worker-client", lab.client, [*LOCUST, "--worker", "--master-host", lab.master_for_client])
    procs.start("worker-master", lab.master, [*LOCUST, "--worker", "--master-host", "127.0.0.1"])
    cmd = [*LOCUST, "--master", "--master-bind-host", "0.0.0.0", "--expect-workers", "2", "--headless"]
    cmd += ["--only-summary", "-u", "6", "-r", "6", "-t", f"{seconds}s", "--host", f"http://{lab.service}:{PORT}"]
    cmd += ["--langs", "en", "--max-tokens", "32", "--schedule", str(schedule), "--fault-secret-file", str(secret)]
    cmd += ["--fault-journal", str(results.parent / "master-journal.json"), "--results-dir", str(results), *more]
    procs.start("master", lab.master, cmd)


def run_in(ns: str, cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """A command in namespace `ns`, to its end."""
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, preexec_fn=in_netns(ns))


def wait_for(what: str, ok: Callable[[], bool], timeout: float) -> float:
    """Poll `ok` until true (AssertionError naming `what` after `timeout`); the time it became so."""
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g}s"
        time.sleep(0.01)
    return time.time()


@contextlib.contextmanager
def staged(tmp: Path, *server_args: str) -> Iterator[tuple[Lab, Procs, Path, Path]]:
    """The three hosts, the server and a fault host (allowed `ALLOW`) on the GPU host: (the lab, its
    processes, the shared secret's file, the fault host's journal); everything removed at the end."""
    with three_hosts() as lab:
        procs = Procs(tmp)
        try:
            secret, journal = secret_file(tmp), tmp / "host-journal.json"
            server(procs, lab, *server_args)
            fault_host(procs, lab, secret, journal, *ALLOW)
            yield lab, procs, secret, journal
        finally:
            procs.stop_all()
