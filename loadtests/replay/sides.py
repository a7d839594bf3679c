"""A replay's results on the master (or a single process): one results directory per side,
`DIR/<run_id>/a` and `DIR/<run_id>/b` (one run id), each a normal results directory of that side's
requests, plus the replay's own figures in run.json's `replay`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from llmchaos import run as results
from llmchaos.histogram import Histogram, HistogramSet
from llmchaos.run.table import table
from loadtests.collector import Collector
from loadtests.exporters import Exporter, FaultState
from loadtests.merge import Merged
from loadtests.options import Settings
from loadtests.protocol import Shipment
from loadtests.replay.fidelity import ReplayStats
from loadtests.replay.settings import ReplaySettings, concurrency
from loadtests.results import RunWriter

LENGTHS = ("requests", "requested", "delivered", "short")
PAIRS = ("pairs", "identical", "output_tokens_a", "output_tokens_b")


class ReplayWriter(RunWriter):
    def __init__(
        self,
        settings: Settings,
        replay: ReplaySettings,
        stats: ReplayStats,
        exporter: Exporter,
        local: Collector | None,
        faults: FaultState | None,
    ) -> None:
        self.replay, self.stats = replay, stats
        super().__init__(settings, exporter, local, faults)

    def open_requests(self, run_dir: Path) -> dict[str, results.RequestsWriter]:
        """One requests.jsonl per side, in its own directory."""
        for side in self.replay.targets:
            (run_dir / side).mkdir(parents=True, exist_ok=True)
        return {side: results.RequestsWriter(run_dir / side / "requests.jsonl") for side in self.replay.targets}

    def absorb(self, process: str, shipment: Shipment) -> None:
        super().absorb(process, shipment)
        if shipment.source:
            self.stats.merge(shipment.source)

    def finish(self, target: str) -> int:
        """Each side's results directory and summary, then the log's skipped lines."""
        status = super().finish(target)
        for line in self.stats.problems.lines():
            print(f"llmchaos: {self.replay.source.path}: skipped {line}", file=sys.stderr)
        return status

    def directories(
        self, target: str, faults: list[results.FaultWindow], ended: float
    ) -> Iterator[tuple[Path | None, results.Run, HistogramSet, str]]:
        """One results directory per side, of that side's requests, with the replay's figures."""
        for side, url in self.replay.targets.items():
            view = self.merged.side(url)
            run = self.run(url, faults, ended, view).model_copy(
                update={
                    "load_profile": {"mode": "replay", "users": concurrency(self.settings.options)},
                    "requests": results.RequestsFile(
                        sample_rate=self.settings.options.requests_sample, written=self.written(side)
                    ),
                    "replay": self.summary(side, view),
                }
            )
            where = self.run_dir / side if self.run_dir is not None else None
            summary = table(run, view.hist, str(where) if where else None)
            schedule = _schedule(run.replay.fidelity if run.replay else None)
            yield where, run, view.hist, f"side {side}: {url}\n{summary}\n{schedule}"

    def summary(self, side: str, view: Merged) -> results.Replay:
        """run.json's `replay` for one side."""
        r, st = self.replay, self.stats
        lag, prepare, send = (view.hist.combined(m) for m in ("schedule_lag", "prepare", "send"))
        minutes = sorted({m for s, m, _ in st.minutes if s == side})
        rows = [
            results.Minute(minute=m, recorded=st.minutes[(side, m, "recorded")], sent=st.minutes[(side, m, "sent")])
            for m in range(minutes[-1] + 1 if minutes else 0)
        ]
        whole = [row for row in rows[:-1] if row.recorded]  # the last minute is cut short by the end
        langs = sorted({lang for s, lang, _ in st.lengths if s == side})
        pair_langs = sorted({lang for lang, _ in st.pairs})
        return results.Replay(
            side=side,
            mode=r.mode,
            log=r.source.path,
            format=r.source.module().NAME,
            targets=r.targets,
            split=r.split,
            salt=r.salt,
            speed=r.speed,
            window={"start": r.start, "end": r.end},
            loop=r.loop,
            sample=r.sample,
            session_order=r.session_order,
            fidelity=results.Fidelity(
                lag=_times(lag) or results.Lag(count=0),
                per_minute=rows,
                recorded=sum(row.recorded for row in rows),
                sent=sum(row.sent for row in rows),
                rate_error_max=max((abs(row.sent / row.recorded - 1) for row in whole), default=None),
                held_by_session=st.held,
                prepare=_times(prepare),
                send=_times(send),
            ),
            output_lengths=[
                results.OutputLength(
                    lang=lang,
                    **{k: st.lengths[(side, lang, k)] for k in ("requests", "requested", "delivered", "short")},
                )
                for lang in langs
            ],
            mirror=[results.MirrorPairs(lang=lang, **{k: st.pairs[(lang, k)] for k in PAIRS}) for lang in pair_langs],
            log_problems=st.problems.to_json(),
        )


def _times(h: Histogram | None) -> results.Lag | None:
    return results.Lag.model_validate(h.summary()) if h is not None else None


def _schedule(f: results.Fidelity | None) -> str:
    """One line: how late the schedule ran, and apart from that, what building and sending cost."""

    def ms(lag: results.Lag | None) -> str:
        return (
            f"{lag.p50 * 1000:.2f} / {lag.p99 * 1000:.2f} ms"
            if lag and lag.p50 is not None and lag.p99 is not None
            else "-"
        )

    if f is None:
        return "schedule: -"
    return f"schedule lag p50 / p99: {ms(f.lag)}; built ahead: {ms(f.prepare)}; sent in: {ms(f.send)}"
