"""Results directories written without a server, through the core's run model: `requests` requests
over the given languages with log-normal TTFT and inter-chunk gaps that a slowly drifting load
lifts and lowers together (so requests close in time are alike, as a queue makes them), a few
failures, and the histograms, outcomes and SLOs a load test writes. For the compare benchmark and
the tests of the readers of results.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np

from llmchaos import run, slo
from llmchaos.histogram import HistogramSet, Key
from llmchaos.run import RequestLine, RequestsWriter

TARGET, API = "http://synthetic", "openai-chat"
TTFT_MEDIAN_S = {"en": 0.060, "de": 0.075, "fr": 0.070, "es": 0.070, "it": 0.070, "pt": 0.070, "zh": 0.085, "ja": 0.095}


def write(
    path: Path,
    requests: int,
    *,
    seed: int = 0,
    slowdown: float = 1.0,
    langs: tuple[str, ...] = ("en", "de", "ja"),
    gaps: int = 16,
    start: float = 1.8e9,
    rate: float = 200.0,
    failures: float = 0.005,
    drift: float = 0.15,
    run_id: str | None = None,
    fault: tuple[float, float] | None = None,
) -> Path:
    """A results directory at `path` (made); every latency times `slowdown`, the load's drift a
    log-normal factor of sigma `drift`; within `fault` (seconds from the start, a fault window in
    run.json) every latency three times as long."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    duration = requests / rate
    t = start + np.sort(rng.uniform(0, duration, requests))
    knots = np.arange(0, duration + 10, 5.0)  # the load drifts between knots 5 s apart
    level = np.exp(drift * np.interp(t - start, knots, rng.normal(0, 1, len(knots))))
    slowed = (t - start >= fault[0]) & (t - start < fault[1]) if fault is not None else np.zeros(requests, bool)
    level *= np.where(slowed, 3.0, 1.0)
    phases = np.where(slowed, "slow", "baseline")  # a request's phase: the window it started in
    lang = rng.integers(0, len(langs), requests)
    median = np.array([TTFT_MEDIAN_S.get(x, 0.07) for x in langs])[lang]
    ttft = slowdown * level * median * np.exp(rng.normal(0, 0.25, requests))
    gap = slowdown * level[:, None] * 0.012 * np.exp(rng.normal(0, 0.2, (requests, gaps)))
    e2e = ttft + gap.sum(axis=1)
    ok = rng.random(requests) >= failures
    slos = slo.load(None)
    hist, outcomes, counts = HistogramSet(), Counter[tuple[str, ...]](), Counter[tuple[str, ...]]()
    with_tokens = gaps + 1
    writer = RequestsWriter(path / "requests.jsonl")
    for i in range(requests):
        tag, good, phase = langs[lang[i]], bool(ok[i]), str(phases[i])
        line = RequestLine(
            request_id=f"r{i}",
            lang=tag,
            api=API,
            target=TARGET,
            phase=phase,
            open_loop=False,
            intended=float(t[i]),
            sent=float(t[i]),
            schedule_lag=0.0,
            outcome="ok" if good else "http_500",
            status=200 if good else 500,
            ttft=float(ttft[i]) if good else None,
            e2e=float(e2e[i]) if good else None,
            gaps=gap[i].tolist() if good else [],
            output_tokens=with_tokens if good else 0,
            own_tokens=with_tokens if good else 0,
            tokens_from="usage" if good else None,
        )
        writer.write((line.encode(),))
        outcomes[(TARGET, tag, API, phase, line.outcome)] += 1
        counts[(TARGET, tag, API, phase, "issued")] += 1
        tpot = (e2e[i] - ttft[i]) / (with_tokens - 1)
        limits = slos.get(tag, {})
        if slo.attained(limits, ok=good, ttft=line.ttft, e2e=line.e2e, tpot=tpot, max_gap=float(gap[i].max())):
            counts[(TARGET, tag, API, phase, "met")] += 1
    writer.close()
    for (li, tag), phase in itertools.product(enumerate(langs), sorted(set(phases.tolist()))):
        sel = (lang == li) & ok & (phases == phase)
        tpot = (e2e[sel] - ttft[sel]) / (with_tokens - 1)
        for metric, values in (
            ("ttft", ttft[sel]),
            ("e2e", e2e[sel]),
            ("tpot", tpot),
            ("inter_chunk", gap[sel].ravel()),
            ("itl", gap[sel].ravel()),
            ("output_tokens", np.full(int(sel.sum()), float(with_tokens))),
        ):
            unique, times = np.unique(np.round(values, 6), return_counts=True)
            hist.record_many(Key(TARGET, tag, API, phase, metric), unique.tolist(), times.tolist())
    end = float(t[-1])
    result = run.Run(
        run_id=run_id or path.name,
        start=run.iso(start),
        end=run.iso(end),
        duration_s=round(end - start, 3),
        command=["synthetic"],
        config={"seed": seed, "slowdown": slowdown},
        targets=[TARGET],
        api=API,
        load_profile={"mode": "synthetic", "rate": rate},
        seeds={"seed": seed},
        host=run.host_info(),
        generator={},
        validity=run.Validity(valid=True),
        outcomes=run.outcome_rows(outcomes),
        slo=slo.evaluate(slos, hist, counts, end - start),
        requests=run.RequestsFile(written=requests),
        summaries=run.summarize(hist),
        faults=[] if fault is None else [_window(start + fault[0], start + fault[1])],
    )
    run.write(path, result, hist)
    return path


def _window(start: float, end: float) -> run.FaultWindow:
    return run.FaultWindow(
        name="slow",
        kind="latency",
        target={"synthetic": TARGET},
        params={"factor": 3},
        planned_start=start,
        planned_end=end,
        actual_start=start,
        actual_end=end,
    )
