"""An A/B replay end to end: the reference server twice, A first-come-first-served, B with weighted
fair queuing per language, the same synthetic log mirrored to both, its English users flooding the
servers. B's results directory shows Chinese and Japanese TTFT p99 well below A's (what WFQ is for),
read back through the run model and `llmchaos report`."""

from __future__ import annotations

import subprocess
import sys

from llmchaos import run
from llmchaos.cli import main
from tests.integration.replay_helpers import replay
from tests.procs import ROOT, serve

# Two sequences at a time: a queue builds as soon as the flood starts.
ENGINE = ("--sim-time-scale", "1", "--max-num-seqs", "2")


def test_wfq_keeps_minority_languages_fast_under_an_english_flood(tmp_path):
    log = tmp_path / "flood.jsonl"
    flood = ["--duration", "12s", "--rate", "14", "--lang-mix", "en=80,zh=10,ja=10", "--sessions", "0"]
    assert main(["logs", "synth", *flood, "--input-median", "60", "--output-median", "12", "--out", str(log)]) == 0
    with serve(*ENGINE, "--policy", "fcfs") as a, serve(*ENGINE, "--policy", "wfq") as b:
        proc = replay(
            "--log", str(log), "--target-a", a.url, "--target-b", b.url, "--mirror",
            "--results-dir", str(tmp_path / "results"), timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "results").iterdir()
    fcfs, wfq = run.load(run_dir / "a"), run.load(run_dir / "b")
    assert fcfs.run.run_id == wfq.run.run_id
    p99 = {}
    for name, results in (("a", fcfs), ("b", wfq)):
        for lang in ("en", "zh", "ja"):
            h = results.histograms.combined("ttft", lang=lang)
            assert h is not None, (name, lang)
            assert h.count > 5, (name, lang)
            p99[name, lang] = h.quantile(99)
    for lang in ("zh", "ja"):
        assert p99["b", lang] < 0.5 * p99["a", lang], p99
    assert p99["a", "en"] > 1.0, p99  # the flood queued on A: the comparison could have failed
    for side in ("a", "b"):
        report = subprocess.run(
            [sys.executable, "-m", "llmchaos.cli", "report", str(run_dir / side)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert report.returncode == 0, report.stderr
        assert [line.split()[0] for line in report.stdout.splitlines()[2:5]] == ["en", "ja", "zh"]
