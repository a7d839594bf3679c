"""What the reports plot of a run's faults: the order its phases came in (warmup, baseline, then each
fault phase by its window's start, overlaps and unconfirmed stretches by their earliest window), and
where each window's languages were back within their SLOs."""

from dashboards.comparison.plotted import phase_order, recovery_marks
from llmchaos.run import FaultWindow


class _Run:
    def __init__(self, *windows: tuple[str, float]) -> None:
        self.recovery: list = []
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


def test_each_revert_is_marked_where_its_slowest_language_was_back():
    from llmchaos.run import Recovery

    def row(lang: str, recover_s: float | None, reverted: float = 130.0, judged: int = 5) -> Recovery:
        return Recovery(
            window="slow", target="t", lang=lang, api="openai-chat", metric="ttft_p99_ms", window_s=1.0, windows=3,
            detect_s=1.0, recover_s=recover_s, recovered=recover_s is not None, judged=judged, needed=100,
            reverted=reverted,
        )  # fmt: skip

    run = _Run()
    run.recovery = [row("en", 2.0), row("de", 4.5), row("ja", None, reverted=180.0), row("fr", 9.0, judged=0)]
    assert recovery_marks(run, 100.0) == [  # type: ignore[arg-type]
        (34.5, "slow: all back +4.5 s after its revert (last: de ttft_p99_ms)"),
        (80.0, "slow reverted; never back within the run: ja ttft_p99_ms"),
    ]
