"""The order a run's phases came in, for the report's tables: warmup, baseline, then each fault
phase by its window's start (overlaps and unconfirmed stretches by their earliest window)."""

from dashboards.comparison.plotted import phase_order
from llmchaos.run import FaultWindow


class _Run:
    def __init__(self, *windows: tuple[str, float]) -> None:
        self.faults = [
            FaultWindow(name=n, kind="sse", target={}, params={}, planned_start=t, planned_end=t + 5)
            for n, t in windows
        ]


def test_phases_sort_in_the_order_they_ran():
    at = phase_order(_Run(("zz-first", 10.0), ("aa-later", 30.0)))  # type: ignore[arg-type]
    phases = ["aa-later", "baseline", "other", "aa-later+zz-first", "zz-first:unconfirmed", "warmup", "zz-first"]
    assert sorted(phases, key=lambda p: (at(p), p)) == [
        "warmup",
        "baseline",
        "aa-later+zz-first",
        "zz-first",
        "zz-first:unconfirmed",
        "aa-later",
        "other",
    ]
