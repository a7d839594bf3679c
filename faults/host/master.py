"""The master's end of its fault hosts (faults/host/): it hears their hellos, has them probe their
targets before any load starts, leases each the windows it should have applied (every second and
at each window's start and end), hears their acknowledgements into the ledger, and hands the
phases decided from them to `publish` (the workers label their requests with them).

Every message is sealed with the shared secret (faults/host/seal.py); one that is not is logged
and dropped. A fault host is never one of Locust's workers: it never says `client_ready`. The
master reaches its hosts through a `Transport` (in a load test, Locust's master runner): this module
imports no Locust.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import gevent

from faults.host import ledger
from faults.host import messages as m
from faults.host.ledger import LOST_S, Host, Ledger
from faults.host.seal import Refused, read_secret, seal, unseal
from faults.schedule import FaultSpec
from faults.timeline import Segment
from llmchaos.errors import UsageError
from llmchaos.run import FaultHost, FaultWindow

log = logging.getLogger("llmchaos.faults")
PROBE_WAIT_S = 15.0
Publish = Callable[[list[Segment], bool], None]  # (new segments, final)


class Message(Protocol):
    """A message as the transport hands it over: who sent it, and its (sealed) data."""

    @property
    def node_id(self) -> str: ...
    @property
    def data(self) -> object: ...


class Transport(Protocol):
    """How the master's end hears and reaches its hosts (Locust's MasterRunner is one)."""

    @property
    def master_bind_host(self) -> str: ...
    @property
    def master_bind_port(self) -> int: ...
    def register_message(self, kind: str, handler: Callable[..., None], /) -> None: ...
    def send_message(self, kind: str, data: dict[str, Any], /, client_id: str) -> None: ...


class FaultHosts:
    """The fault hosts of a schedule (`path`): `specs`, its windows on them, and `ledger`, the
    master's record of them (a new one for each test)."""

    def __init__(
        self, runner: Transport, path: str, specs: list[FaultSpec], ledger: Ledger, secret: bytes, publish: Publish
    ) -> None:
        self.runner, self.path, self.specs, self.ledger = runner, path, specs, ledger
        self.secret, self.publish = secret, publish
        self.id = uuid.uuid4().hex  # this master session: hosts follow its leases
        self.seq = 0
        self.probed: dict[str, m.Probed] = {}
        self._loop: gevent.Greenlet | None = None
        for kind, handler in ((m.HELLO, self._hello), (m.PROBED, self._probed), (m.ACK, self._ack)):
            runner.register_message(kind, handler)

    @classmethod
    def of(
        cls,
        runner: Transport,
        path: str,
        specs: list[FaultSpec],
        ledger: Ledger,
        publish: Publish,
        secret_file: str | None,
        wait_s: float,
    ) -> FaultHosts:
        """The master's end of a schedule's fault hosts, every one connected and its targets probed
        before this returns (UsageError otherwise: before any load starts)."""
        try:
            secret = read_secret(secret_file or None, "the fault hosts' secret")
        except ValueError as e:
            raise UsageError(str(e), field="--fault-secret-file") from None
        hosts = cls(runner, path, specs, ledger, secret, publish)
        hosts.connect(wait_s)
        return hosts

    # -- messages from the hosts -------------------------------------------------------------------
    def _open(self, kind: str, msg: Message, cls: type[m.M]) -> m.M | None:
        try:
            return m.parse(cls, unseal(self.secret, kind, msg.node_id, msg.data))
        except Refused as e:
            log.warning("refused a %s message from %s: %s", kind, msg.node_id, e)
            return None

    def _host(self, msg: Message) -> Host | None:
        return next((h for h in self.ledger.hosts.values() if h.identity == msg.node_id), None)

    def _hello(self, msg: Message, **_: object) -> None:
        hello = self._open(m.HELLO, msg, m.Hello)
        if hello is None:
            return
        if msg.node_id != f"llmchaos-fault-host.{hello.name}.{hello.boot}":
            log.warning("refused a hello from %s: it names another host (%s)", msg.node_id, hello.name)
            return
        h = self.ledger.hosts.get(hello.name)
        if h is None:
            log.info("fault host %s said hello; this schedule has no window there", hello.name)
            return
        now = time.time()
        if hello.boot == h.boot:
            h.heard = now
            return
        if hello.boot in h.past or (h.boot is not None and hello.started < h.started):
            log.warning("refused a hello from %s: an earlier run of fault host %s (a replay?)", msg.node_id, h.name)
            return
        if h.boot is not None and now - h.heard < LOST_S:  # the run followed is alive: two under one name
            if h.rival != hello.boot:
                log.warning(
                    "refused a hello from %s: fault host %s is already run %s, alive; give each host its own --name",
                    msg.node_id, h.name, h.boot,
                )  # fmt: skip
            h.rival = hello.boot
            return
        log.info("fault host %s joined (%s): %s", hello.name, "again" if h.boot else "first time", hello.reach)
        if h.boot is not None:  # a new run of it: what the last one held ended unseen
            h.past.add(h.boot)
            for w in self.ledger.windows.values():
                if w.host == h.name:
                    w.restarted(h, now)
        h.identity, h.boot, h.reach, h.lateness_s = msg.node_id, hello.boot, hello.reach, float(hello.max_lateness)
        h.started, h.heard, h.rival = hello.started, now, None
        h.sent.clear()

    def _probed(self, msg: Message, **_: object) -> None:
        answer = self._open(m.PROBED, msg, m.Probed)
        h = self._host(msg)
        if answer is not None and h is not None and answer.session == self.id:
            self.probed[h.name] = answer

    def _ack(self, msg: Message, **_: object) -> None:
        t4 = time.time()
        ack = self._open(m.ACK, msg, m.Ack)
        h = self._host(msg)
        if ack is None or h is None or ack.session != self.id or ack.boot != h.boot:
            return
        h.heard = t4
        self.ledger.ack(h.name, ack, t4)
        self._advance()

    # -- before the load -------------------------------------------------------------------------
    def connect(self, wait_s: float) -> None:
        """Every host the schedule names has said hello and finds each of its windows' targets
        fit (its probe); else a UsageError naming the schedule's line, before any load starts."""
        path, specs = self.path, self.specs
        deadline = time.monotonic() + wait_s
        while (missing := [h for h in self.ledger.hosts.values() if h.boot is None]) and time.monotonic() < deadline:
            gevent.sleep(0.05)
        if missing:
            spec = next(f for f in specs if f.host == missing[0].name)
            where = f"{self.runner.master_bind_host}:{self.runner.master_bind_port}"
            raise UsageError(
                f"fault host {spec.host!r} is not connected (waited {wait_s:g}s for it on the master's port, {where})",
                file=path,
                line=spec.target_line,
                field=f"faults[{spec.index}].target.host",
            )
        gevent.sleep(1.2 * m.HELLO_S)  # an unleased host says hello this often: a second run under its name is heard
        for h in self.ledger.hosts.values():
            if h.rival is not None:
                spec = next(f for f in specs if f.host == h.name)
                raise UsageError(
                    f"two runs of fault host {h.name!r} are alive ({h.boot} and {h.rival}): give each its own --name",
                    file=path,
                    line=spec.target_line,
                    field=f"faults[{spec.index}].target.host",
                )
            if self.ledger.lease_s < 2 * m.RENEW_S + h.lateness_s:  # a late renewal renews nothing there
                raise UsageError(
                    f"a lease of {self.ledger.lease_s:g}s would lapse on fault host {h.name!r} between renewals: "
                    f"it needs two renewals ({2 * m.RENEW_S:g}s) and the lateness it allows ({h.lateness_s:g}s)",
                    field="--fault-lease",
                )
        for h in self.ledger.hosts.values():
            planned = [m.Planned(f.name, f.kind, f.target, f.applied_params) for f in specs if f.host == h.name]
            self._send(h, m.PROBE, m.Probe(h.boot or "", self.id, planned))
        deadline = time.monotonic() + PROBE_WAIT_S
        while set(self.ledger.hosts) - set(self.probed) and time.monotonic() < deadline:
            gevent.sleep(0.05)
        for f in specs:
            assert f.host is not None
            answer = self.probed.get(f.host)
            silent = m.Verdict(f"no answer to its probe in {PROBE_WAIT_S:g}s")
            verdict = answer.results.get(f.name) if answer else silent
            if verdict is not None and verdict.reason:
                at = (verdict.field or "target").split(".")[0]
                raise UsageError(
                    f"cannot inject {f.kind} on fault host {f.host!r}: {verdict.reason}",
                    file=path,
                    line=f.target_line if at == "target" else f.lines.get(at, f.params_line),
                    field=f"faults[{f.index}].{verdict.field or 'target'}",
                )

    # -- the run -----------------------------------------------------------------------------------
    def start(self, t0: float) -> None:
        """Lease the schedule's windows from `t0`, in a new record (the hosts stay connected)."""
        self.id = uuid.uuid4().hex
        self.ledger = self.ledger.renewed()
        self.ledger.begin(t0, time.time())
        self._loop = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            now = self._lease()
            self._advance()
            gevent.sleep(max(0.0, min(now + m.RENEW_S, self.ledger.next_edge(now) + 1e-4) - time.time()))

    def _lease(self) -> float:
        """A lease to every host heard from: the windows it should have applied now."""
        now = time.time()
        for name, h in self.ledger.hosts.items():
            windows = self.ledger.desired(name, now)  # tracked even while the host is away
            if h.identity is not None:
                self.seq += 1
                sent = time.time()
                h.sent[self.seq] = sent
                lease = m.Lease(h.boot or "", self.id, self.seq, sent, windows, h.settle, time.monotonic())
                self._send(h, m.LEASE, lease)
        return now

    def _send(self, h: Host, kind: str, payload: object) -> None:
        assert h.identity is not None
        self.runner.send_message(kind, seal(self.secret, kind, h.identity, m.body(payload)), client_id=h.identity)

    def _advance(self, final: bool = False) -> None:
        segments = self.ledger.advance(time.time(), final)
        if segments or final:
            self.publish(segments, final)

    def stop(self, timeout: float = 5.0) -> tuple[list[FaultWindow], list[FaultHost]]:
        """Lease nothing from now on, wait (up to `timeout`) for every host in contact to say it
        reverted, then decide the phases to the end; the windows and the hosts for run.json."""
        now = time.time()
        self.ledger.stop(now)
        self._lease()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._reverted(now):
            gevent.sleep(0.02)
        if self._loop is not None:
            self._loop.kill(block=True)
            self._loop = None
        self._advance(final=True)
        return ledger.timeline(self.ledger), ledger.hosts(self.ledger)

    def _reverted(self, since: float) -> bool:
        """Whether every host heard from has answered a lease sent at or after `since`, holding nothing."""
        now = time.time()
        hosts = [h for h in self.ledger.hosts.values() if h.last_ack is not None and now - h.last_ack < LOST_S]
        held = {w.host for w in self.ledger.windows.values() if w.held()}
        return all(h.known >= since and h.name not in held for h in hosts)

    def summary(self) -> dict[str, Any]:
        """Per host, for the web UI: connected, offset and its uncertainty (ms)."""
        return {
            h.name: {
                "connected": h.boot is not None,
                "offset_ms": round(h.clock.offset * 1000, 2) if h.clock.best else None,
                "uncertainty_ms": round((h.clock.uncertainty or 0) * 1000, 2) if h.clock.best else None,
            }
            for h in self.ledger.hosts.values()
        }
