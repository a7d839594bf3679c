"""The fault host's process: it joins a Locust master's port as a ZeroMQ DEALER, the way a worker
does, but never says `client_ready`, so the master never counts it among its workers (`runner.clients`,
`worker_count`) and never hands it users: its CPU stays the server's beside it. The master hears it
through messages registered with `register_message` (faults/host/messages.py).

It says hello (its name, a boot nonce, what it may touch) until a master leases it; answers probes;
and makes this host match each lease (applier.py), acknowledging with its own clock's times (and
its GPUs' energy counters, meter.py).
It acts only on a message sealed with its secret, addressed to this run of it (its boot nonce),
from the master session it follows (a later session replaces it; an earlier one is never taken back)
and newer than the last; several leases waiting are one: the newest. A lease that comes later than
the quickest one so far by more than `max_lateness` (queued while the link was down) renews nothing;
lateness is judged on the master's monotonic clock, which no step of its wall clock moves.
Everything refused is logged, and changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections import deque
from typing import Any

import zmq

from faults.host import messages as m
from faults.host.applier import Applier
from faults.host.meter import Meter
from faults.host.seal import Refused, decode, encode, seal, unseal
from faults.injectors import KINDS
from faults.injectors.base import FieldError

log = logging.getLogger("llmchaos.faults.host")
LAG_WINDOW_S = 120.0  # the quickest lease (send to receipt) of this long is the yardstick of lateness


class Agent:
    def __init__(
        self,
        master: str,
        name: str,
        secret: bytes,
        applier: Applier,
        max_lateness_s: float = 1.0,
        meter: Meter | None = None,
    ) -> None:
        self.name, self.secret, self.applier, self.max_lateness_s = name, secret, applier, max_lateness_s
        self.meter = meter
        self.boot, self.started = secrets.token_hex(8), time.time()
        self.identity = f"llmchaos-fault-host.{name}.{self.boot}"
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.IDENTITY, self.identity.encode())
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
        self.sock.setsockopt(zmq.TCP_KEEPALIVE_IDLE, 30)
        self.sock.setsockopt(zmq.IPV6, 1)
        self.sock.connect(f"tcp://{master}")
        self.session: str | None = None
        self.retired: set[str] = set()  # sessions replaced by a later one: never followed again
        self.last_seq = -1
        self.leased = -float("inf")  # monotonic: the last lease acted on
        self.lags: deque[tuple[float, float]] = deque()  # (receipt, receipt - sent) over LAG_WINDOW_S
        self.quickest = float("inf")
        self.refused = 0

    def run(self, stopping: threading.Event) -> None:
        """Until `stopping`: hello while unleased, every message in, expiries kept; then revert all."""
        hello_at = 0.0
        try:
            while not stopping.is_set():
                now = time.monotonic()
                unleased = now - self.leased > 2 * m.HELLO_S
                if unleased and now >= hello_at:
                    reach = self.applier.reach.declare()
                    self._send(m.HELLO, m.Hello(self.name, self.boot, reach, self.max_lateness_s, self.started))
                    hello_at = now + m.HELLO_S
                wait = min(hello_at - now if unleased else 0.1, self.applier.next_deadline() - now, 0.1)
                if self.sock.poll(max(0, int(wait * 1000))):
                    self._receive(self._drain())
                self.applier.tick()
        finally:
            self.applier.revert_all("the fault host is stopping")
            self.sock.close()

    def _drain(self) -> list[tuple[bytes, float, float]]:
        """Every frame waiting now, each with its receipt time (wall clock, monotonic)."""
        frames = []
        while True:
            try:
                frames.append((self.sock.recv(zmq.NOBLOCK), time.time(), time.monotonic()))
            except zmq.Again:
                return frames

    def _send(self, kind: str, payload: object) -> None:
        sealed = seal(self.secret, kind, self.identity, m.body(payload))
        with contextlib.suppress(zmq.Again):  # no master connected now: the next hello or ack goes instead
            self.sock.send(encode(kind, sealed, self.identity), zmq.NOBLOCK)

    def _refuse(self, kind: str, why: str) -> None:
        self.refused += 1
        log.warning("refused a %s message: %s", kind, why)

    def _receive(self, frames: list[tuple[bytes, float, float]]) -> None:
        newest: tuple[m.Lease, float, float] | None = None
        for frame, wall, mono in frames:
            kind = "?"
            try:
                kind, data, sender = decode(frame)
                if kind not in (m.LEASE, m.PROBE):
                    raise Refused(f"not a fault host message ({kind})")
                body = unseal(self.secret, kind, sender, data)
                if body.get("to") != self.boot:
                    raise Refused("addressed to another run of this host (a replay?)")
                if kind == m.PROBE:
                    self._probe(m.parse(m.Probe, body))
                    continue
                lease = m.parse(m.Lease, body)
                self._check(lease)
                if newest is None or lease.seq > newest[0].seq:
                    newest = (lease, wall, mono)
            except Refused as e:
                self._refuse(kind, str(e))
        if newest is not None:
            self._lease(*newest)

    def _check(self, lease: m.Lease) -> None:
        """Refused unless `lease` is the followed session's next (or opens a newer session)."""
        if lease.session in self.retired:
            raise Refused(f"from master session {lease.session}, which a later one replaced")
        if lease.session == self.session and lease.seq <= self.last_seq:
            raise Refused(f"lease {lease.seq} is not newer than {self.last_seq} (a replay?)")

    def _lease(self, lease: m.Lease, wall: float, mono: float) -> None:
        if lease.session != self.session:
            if self.session is not None:
                self.retired.add(self.session)
            log.info("following master session %s", lease.session)
            self.session, self.last_seq, self.lags, self.quickest = lease.session, -1, deque(), float("inf")
        self.last_seq = lease.seq
        origin = lease.sent if lease.sent_mono is None else lease.sent_mono  # the master's clock that never steps
        lag = mono - origin
        while self.lags and self.lags[0][0] < mono - LAG_WINDOW_S:
            self.lags.popleft()
        self.lags.append((mono, lag))
        if len(self.lags) == 1:  # none recent to compare with (a long silence): the last yardstick holds
            self.quickest = min(self.quickest, lag)
        else:
            self.quickest = min(x for _, x in self.lags)
        late = lag - self.quickest
        stale = late > self.max_lateness_s
        if stale:
            self._refuse(m.LEASE, f"lease {lease.seq} came {late:.2f} s later than the quickest: stale, renews nothing")
        else:
            self.leased = mono
            self.applier.match(lease, origin + self.quickest)
        records = self.applier.records(lease.session)
        energy, why = (self.meter.read(), self.meter.why) if self.meter is not None else ([], None)
        ack = m.Ack(self.boot, lease.session, lease.seq, lease.sent, wall, time.time(), records, stale, energy, why)
        self._send(m.ACK, ack)

    def _probe(self, probe: m.Probe) -> None:
        """Whether each fault of the master's schedule could run here now (nothing is changed)."""
        results = {p.fault: self._verdict(p) for p in probe.faults}
        self._send(m.PROBED, m.Probed(self.boot, probe.session, results))

    def _verdict(self, p: m.Planned) -> m.Verdict:
        refused = self.applier.reach.refusal(p.kind, p.target)
        if refused is not None:
            return m.Verdict(refused, "target")
        try:
            KINDS[p.kind].check(p.target, p.params)
            reason = KINDS[p.kind](p.target, self.applier.reach.allow).probe(p.params)
        except FieldError as e:
            return m.Verdict(str(e), e.field)
        except Exception as e:  # noqa: BLE001 - a probe that cannot run is an answer too
            return m.Verdict(f"{type(e).__name__}: {e}", "target")
        return m.Verdict(reason, "target" if reason else None)


def hello_summary(reach: dict[str, Any]) -> str:
    """What a host declared it may touch, in one line."""
    parts = [f"{k} {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in reach.items() if v]
    return "; ".join(parts) or "nothing"
