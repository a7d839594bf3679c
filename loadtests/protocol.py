"""Every message between the master and its workers, with its payload and its handler.

- `llmchaos_plan`, master -> worker at test start: the source's plan for that worker (`ArrivalPlan`,
  `ReplayPlan`: a typed dataclass, sent as its fields);
- `llmchaos_faults`, master -> worker at test start with faults: `FaultClock` (faults/timeline.py);
- Locust's own report, worker -> master every few seconds: a `Shipment` under the key `llmchaos`;
- `llmchaos_flush`, master -> worker at test stop: no payload;
- `llmchaos_final`, worker -> master, the answer to a flush: a `Shipment`;
- `llmchaos_share_done`, worker -> master once its share of a log is sent and ended: no payload;
- `llmchaos_phases`, master -> worker as the fault hosts' windows are decided: `PhaseUpdate`
  (faults/timeline.py); a worker labels a request once its start is settled.

With fault hosts (faults/host/, `target: {host: ...}` in a schedule), the master's end of theirs is
faults/host/master.py and their messages, sealed with the shared secret, are
faults/host/messages.py's (a fault host does not import the load tests): `llmchaos_host_hello`,
`llmchaos_host_probe`, `llmchaos_host_probed`, `llmchaos_lease`, `llmchaos_host_ack`.

A single process has no messages: its harness plans, ships and merges in place.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

import gevent

from faults.timeline import FaultClock, PhaseUpdate

if TYPE_CHECKING:  # importing locust monkey-patches the process: tests import this module without it
    from locust.rpc import Message
    from locust.runners import MasterRunner, WorkerRunner

log = logging.getLogger("llmchaos")
PLAN, FAULTS, FLUSH, FINAL, SHARE_DONE, PHASES = (
    "llmchaos_plan",
    "llmchaos_faults",
    "llmchaos_flush",
    "llmchaos_final",
    "llmchaos_share_done",
    "llmchaos_phases",
)
REPORT_KEY = "llmchaos"  # our part of Locust's own report from a worker
FINAL_WAIT_S = 15.0


@dataclass(frozen=True)
class Shipment:
    """A process's data since its last shipment: its collector's (histograms, counts, records per
    side), its self-watch samples, and what its source keeps (a replay's figures)."""

    collector: dict[str, Any]
    watch: dict[str, Any]
    source: dict[str, Any]

    def message(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> Shipment:
        return cls(data["collector"], data["watch"], data.get("source") or {})


class Harness(Protocol):
    """What the two ends ask of the harness."""

    def plan(self, t0: float, worker: int, workers: int) -> dict[str, Any] | None: ...
    def start_source(self, plan: dict[str, Any]) -> None: ...
    def follow_faults(self, clock: FaultClock) -> None: ...
    def follow_phases(self, update: PhaseUpdate) -> None: ...
    def shipment(self, streaming: bool) -> Shipment: ...
    def absorb(self, process: str, shipment: Shipment) -> None: ...


class Master:
    """The master's end: it plans each worker's share, hears their shipments and that their shares
    are done, and collects their last data at test stop (instead of trusting Locust's 0.5 s after
    quit)."""

    def __init__(self, runner: MasterRunner, harness: Harness) -> None:
        self.runner, self.harness = runner, harness
        self.finals: set[str] = set()  # workers whose final shipment came
        self.shares_done: set[str] = set()  # workers whose share of the source is done
        runner.register_message(FINAL, self._final)
        runner.register_message(SHARE_DONE, lambda msg, **_: self.shares_done.add(msg.node_id))
        runner.environment.events.worker_report.add_listener(self._report)

    @property
    def workers(self) -> set[str]:
        return {c.id for c in self.runner.clients.values()}

    def start(self, clock: FaultClock | None, plan_t0: float) -> None:
        """Each worker's fault clock and its share of the source's plan."""
        self.shares_done.clear()
        workers = sorted(self.workers)
        for i, cid in enumerate(workers):
            if clock is not None:
                self.runner.send_message(FAULTS, asdict(clock), client_id=cid)
            if (plan := self.harness.plan(plan_t0, i, len(workers))) is not None:
                self.runner.send_message(PLAN, plan, client_id=cid)

    def phases(self, update: PhaseUpdate) -> None:
        """The fault hosts' newly decided phases, to every worker."""
        for cid in self.workers:
            self.runner.send_message(PHASES, asdict(update), client_id=cid)

    def all_shares_done(self) -> bool:
        workers = self.workers
        return bool(workers) and self.shares_done >= workers

    def settled(self) -> bool:
        """Every worker's last data has come."""
        return self.finals >= self.workers

    def collect_finals(self) -> None:
        """Ask every worker for its last data and wait for all of it (FINAL_WAIT_S at most)."""
        workers, self.finals = self.workers, set()
        for cid in workers:
            self.runner.send_message(FLUSH, None, client_id=cid)
        deadline = time.monotonic() + FINAL_WAIT_S
        while not self.finals >= workers and time.monotonic() < deadline:
            gevent.sleep(0.05)
        if missing := workers - self.finals:
            log.warning("no final data from %d worker(s) in %.0fs: %s", len(missing), FINAL_WAIT_S, sorted(missing))

    def _report(self, client_id: str, data: dict[str, Any], **_: object) -> None:
        if REPORT_KEY in data:
            self.harness.absorb(client_id, Shipment.from_message(data[REPORT_KEY]))

    def _final(self, msg: Message, **_: object) -> None:
        self.harness.absorb(msg.node_id, Shipment.from_message(msg.data))
        self.finals.add(msg.node_id)


class Worker:
    """A worker's end: it starts its share of the plan, follows the master's fault clock, ships its
    data with every report and, asked at test stop, stops and ships the rest."""

    def __init__(self, runner: WorkerRunner, harness: Harness) -> None:
        self.runner, self.harness = runner, harness
        runner.register_message(PLAN, lambda msg, **_: harness.start_source(msg.data))
        runner.register_message(FAULTS, lambda msg, **_: harness.follow_faults(FaultClock.from_message(msg.data)))
        runner.register_message(PHASES, lambda msg, **_: harness.follow_phases(PhaseUpdate.from_message(msg.data)))
        runner.register_message(FLUSH, self._flush)
        runner.environment.events.report_to_master.add_listener(self._report)

    def share_done(self) -> None:
        self.runner.send_message(SHARE_DONE, None)

    def _report(self, client_id: str, data: dict[str, Any], **_: object) -> None:
        data[REPORT_KEY] = self.harness.shipment(streaming=self.runner.user_count > 0).message()

    def _flush(self, msg: Message, **_: object) -> None:
        """Stop now and hand over everything, cancelled requests included, while the master still
        listens (after its quit it waits only 0.5 s for a last report)."""
        self.runner.stop()
        self.runner.send_message(FINAL, self.harness.shipment(streaming=False).message())
