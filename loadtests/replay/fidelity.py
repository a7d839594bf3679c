"""What a replay counts besides the requests' own measurements, in every process, merged by the
master like the histograms: per side and minute the requests due and sent (schedule fidelity), per
side and language the output tokens asked for and delivered, per language the mirrored pairs and
how many answered the same text, turns held for their session, and the log's skipped lines."""

from __future__ import annotations

from collections import Counter
from typing import Any

from loadtests.logs.problems import Problems
from loadtests.record import RequestRecord


class ReplayStats:
    def __init__(self, log: str = "") -> None:
        self.t0 = 0.0  # unix time the schedule starts: minute 0
        self.minutes: Counter[tuple[str, int, str]] = Counter()  # (side, minute, recorded | sent)
        self.lengths: Counter[tuple[str, str, str]] = Counter()  # (side, lang, requests|requested|delivered|short)
        self.pairs: Counter[tuple[str, str]] = Counter()  # (lang, pairs|identical|output_tokens_a|output_tokens_b)
        self.held = 0
        self.problems = Problems(log)

    def minute(self, t: float) -> int:
        return int((t - self.t0) // 60)

    def due(self, sides: tuple[str, ...], intended: float) -> None:
        for side in sides:
            self.minutes[(side, self.minute(intended), "recorded")] += 1

    def done(self, side: str, rec: RequestRecord, requested: int | None) -> None:
        """A request that ended (not cut by the end of the test)."""
        if rec.sent:
            self.minutes[(side, self.minute(rec.sent), "sent")] += 1
        if rec.outcome != "ok" or requested is None:
            return
        delivered = rec.output_tokens
        self.lengths.update(
            {
                (side, rec.lang, "requests"): 1,
                (side, rec.lang, "requested"): requested,
                (side, rec.lang, "delivered"): delivered,
                (side, rec.lang, "short"): int(delivered < requested),
            }
        )

    def pair(self, lang: str, identical: bool, a: RequestRecord, b: RequestRecord) -> None:
        """A mirrored request answered on both sides."""
        self.pairs.update(
            {
                (lang, "pairs"): 1,
                (lang, "identical"): int(identical),
                (lang, "output_tokens_a"): a.output_tokens,
                (lang, "output_tokens_b"): b.output_tokens,
            }
        )

    def drain(self) -> dict[str, Any]:
        """Everything since the last drain, as plain data (a worker's report to the master)."""
        data = {
            "minutes": [[*k, n] for k, n in self.minutes.items()],
            "lengths": [[*k, n] for k, n in self.lengths.items()],
            "pairs": [[*k, n] for k, n in self.pairs.items()],
            "held": self.held,
            "problems": self.problems.to_json(),
        }
        self.minutes, self.lengths, self.pairs, self.held = Counter(), Counter(), Counter(), 0
        self.problems = Problems(self.problems.path)
        return data

    def merge(self, data: dict[str, Any]) -> None:
        """Add a drain of another process."""
        for side, minute, what, n in data["minutes"]:
            self.minutes[(side, int(minute), what)] += n
        for side, lang, what, n in data["lengths"]:
            self.lengths[(side, lang, what)] += n
        for lang, what, n in data["pairs"]:
            self.pairs[(lang, what)] += n
        self.held += data["held"]
        self.problems.merge(data["problems"])
