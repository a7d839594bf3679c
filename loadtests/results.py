"""A run's results on the master (or a single process), from test start to the summary: the merged
totals, the live export, and at the end run.json through the core's run model, the summary table
and the exit code for `--check-slo`."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import gevent
from gevent.event import Event

from llmchaos import bounds, recovery, slo
from llmchaos import run as results
from llmchaos.histogram import HistogramSet
from llmchaos.run.table import table
from loadtests.collector import Collector
from loadtests.energy import attribute
from loadtests.energy.sampler import Sampler
from loadtests.exporters import Exporter, FaultState
from loadtests.merge import Merged
from loadtests.options import Settings
from loadtests.protocol import Shipment
from loadtests.record import SIDE
from loadtests.selfwatch import SelfWatch, verdict
from loadtests.sessions import Sessions
from loadtests.sessions import merge as merge_sessions
from loadtests.sessions import rows as session_rows

SECRET_OPTIONS = {"api_key"}
LOCAL = "local"  # a single process's name among the generator's processes


def worker_name(names: dict[str, str], client_id: str) -> str:
    """A worker as a person tells it apart in `names` (Locust's ids to theirs): its host and its
    number, in the order they were first heard (Locust's id is the host and a random hex)."""
    if client_id not in names:
        host = client_id.rsplit("_", 1)[0] if "_" in client_id else client_id
        names[client_id] = f"worker {len(names) + 1} on {host}"
    return names[client_id]


class RunWriter:
    """One run: its id and results directory from test start, requests.jsonl written as records
    arrive, the totals merged (a single process shares its own collector's) and exported live."""

    def __init__(
        self, settings: Settings, exporter: Exporter, local: Collector | None, faults: FaultState | None
    ) -> None:
        self.settings, self.exporter = settings, exporter
        self.run_id, self.started = results.new_run_id(), time.time()
        self.run_dir = Path(settings.options.results_dir) / self.run_id if settings.options.results_dir else None
        self.requests = self.open_requests(self.run_dir) if self.run_dir is not None else {}
        self.merged = Merged(self.requests, local)
        self.guard_trips: list[results.GuardTrip] = []  # the live guard's, at the end
        self.fault_windows: list[results.FaultWindow] = []  # the faults as they ran, at the end
        self.fault_hosts: list[results.FaultHost] = []  # the schedule's fault hosts, at the end
        self.fault_recovery: list[results.Recovery] = []  # each fault window's, every target's, at the end
        self._local: tuple[Collector, SelfWatch, gevent.Greenlet] | None = None
        self._local_done = Event()
        self._names: dict[str, str] = {}  # Locust's worker ids -> worker_name
        self.cost: list[results.Cost] = []  # per (target, lang, api, phase), at the end (--energy-from)
        self.energy: results.Energy | None = None
        self.sampler: Sampler | None = None
        self.stopped: float | None = None  # when the test began to stop: the energy's end
        self.sessions: dict[str, Counter[str]] = {}  # --sessions: per language, how conversations ended
        self.local_sessions: Sessions | None = None  # a single process's own conversations
        if settings.energy is not None:
            self.sampler = Sampler(settings.energy.fresh(), settings.options.energy_interval, faults)
            self.sampler.start()
        exporter.start(self.merged, faults, self.run_id)

    def stop_begins(self) -> None:
        self.stopped = time.time()
        if self.sampler is not None:
            self.sampler.source.sample()

    def follow_local(self, collector: Collector, watch: SelfWatch) -> None:
        """A single process shares its collector with the totals: only its records and self-watch
        need taking, every second until `finish` (a flush is never cut short: it holds taken records)."""
        self._local = (collector, watch, gevent.spawn(self._local_loop, collector, watch))

    def _local_loop(self, collector: Collector, watch: SelfWatch) -> None:
        while not self._local_done.wait(1.0):
            self._flush_local(collector, watch)

    def _flush_local(self, collector: Collector, watch: SelfWatch) -> None:
        self.merged.write_records(collector.take_records())
        self.merged.watch(LOCAL, watch.drain())

    def open_requests(self, run_dir: Path) -> dict[str, results.RequestsWriter]:
        """requests.jsonl per side (one here), written as records arrive."""
        run_dir.mkdir(parents=True, exist_ok=True)
        return {SIDE: results.RequestsWriter(run_dir / "requests.jsonl")}

    def written(self, side: str = SIDE) -> int:
        """Lines written to a side's requests.jsonl."""
        writer = self.requests.get(side)
        return writer.written if writer is not None else 0

    def absorb(self, process: str, shipment: Shipment) -> None:
        """A worker's shipment: its collector's data and its self-watch samples."""
        self.merged.merge(shipment.collector)
        self.merged.watch(worker_name(self._names, process), shipment.watch)
        merge_sessions(self.sessions, shipment.source.get("sessions") or {})

    def close_requests(self) -> None:
        for writer in self.requests.values():
            writer.close()

    def run(
        self, target: str, faults: list[results.FaultWindow], ended: float, merged: Merged | None = None
    ) -> results.Run:
        """run.json's content, from the merged totals (or a part of them: one target's)."""
        settings, merged = self.settings, self.merged if merged is None else merged
        o, prof = settings.options, settings.profile
        gen = verdict(merged.generator)
        slo_rows = slo.evaluate(settings.slos, merged.hist, merged.slo_counts, ended - self.started)
        bars = bounds.evaluate(merged.hist, merged.late, slo_rows)
        material = bounds.material(bars, slo_rows)
        flags = [*gen["flags"], *sorted({f"bound_material:{line.split()[0]}" for line in material})]
        options = {
            k: v
            for k, v in vars(o).items()
            if isinstance(v, (str, int, float, bool, list, type(None))) and k not in SECRET_OPTIONS
        }
        return results.Run(
            run_id=self.run_id,
            start=results.iso(self.started),
            end=results.iso(ended),
            duration_s=round(ended - self.started, 3),
            command=sys.argv,
            config=options,
            targets=[target],
            api=o.api,
            load_profile={
                "mode": "open" if settings.open_loop else "closed",
                "rate": o.rate,
                "arrival": o.arrival,
                "burstiness": o.burstiness,
                "users": o.num_users,
                "spawn_rate": o.spawn_rate,
                "stages": [vars(s) for s in prof.stages] if prof else None,
                "sessions": settings.sessions.to_json() if settings.sessions else None,
            },
            seeds={"seed": o.seed},
            host=results.host_info(),
            generator=gen["processes"],
            validity=results.Validity(
                valid=not flags,
                flags=tuple(flags),
                reasons=(*gen["reasons"], *material),
                unjudged=tuple(gen["unjudged"]),
                bounds=tuple(bars),
            ),
            reads=results.Reads(**gen["reads"]),
            faults=faults,
            fault_hosts=self.fault_hosts,
            outcomes=results.outcome_rows(
                merged.outcomes, {k[:4]: n for k, n in merged.slo_counts.items() if k[4] == "at_stop"}
            ),
            canaries=results.canary_rows(merged.slo_counts, merged.outcomes),
            endings=merged.endings.rows(),
            sessions=session_rows(self.sessions, target, o.api),
            slo=slo_rows,
            requests=results.RequestsFile(sample_rate=o.requests_sample, written=self.written()),
            summaries=results.summarize(merged.hist),
            guard=[t for t in self.guard_trips if t.target == target],
            recovery=[r for r in self.fault_recovery if r.target == target],
            cost=[c for c in self.cost if c.target == target],
            energy=self.energy.model_copy(update={"blocks": [b for b in self.energy.blocks if b.target == target]})
            if self.energy is not None
            else None,
        )

    def finish(self, target: str) -> int:
        """Push the totals a last time, write each results directory, print its summary; with
        `--check-slo`, the exit status of all their SLO rows together (slo.exit_status), else 0."""
        if self._local is not None:
            collector, watch, loop = self._local
            self._local_done.set()
            loop.join()
            self._flush_local(collector, watch)
        if self.local_sessions is not None:
            merge_sessions(self.sessions, self.local_sessions.drain())
        ended = time.time()
        merged, settings = self.merged, self.settings
        self.fault_recovery = recovery.evaluate(
            merged.slices, self.fault_windows, settings.recovery, merged.outcomes, ended
        )
        if self.sampler is not None:
            until = self.stopped or ended
            readings = self.sampler.stop(self.started, until)
            self.cost, self.energy = attribute.attribute(
                readings, merged.tokens, merged.produced, settings.prices, self.started, until
            )
        self.exporter.finish(self.run_id, self.fault_recovery, self.cost)
        self.close_requests()
        rows: list[results.SloResult] = []
        for where, run, hist, summary in self.directories(target, self.fault_windows, ended):
            if where is not None:
                results.write(where, run, hist)
            print(summary, file=sys.stderr)
            rows += run.slo
        return slo.exit_status(rows) if self.settings.options.check_slo else 0

    def directories(
        self, target: str, faults: list[results.FaultWindow], ended: float
    ) -> Iterator[tuple[Path | None, results.Run, HistogramSet, str]]:
        """Each results directory of the run (None: none is written), its run.json, its histograms
        and its summary: one, of every request."""
        run = self.run(target, faults, ended)
        yield (
            self.run_dir,
            run,
            self.merged.hist,
            table(run, self.merged.hist, str(self.run_dir) if self.run_dir else None),
        )
