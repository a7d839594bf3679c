"""An A/B replay end to end: the reference server twice, A first-come-first-served, B with weighted
fair queuing per language, the same synthetic log mirrored to both, its English users flooding the
servers. B's results directory shows Chinese and Japanese TTFT p99 well below A's (what WFQ is for),
read back through the run model and by `llmchaos compare`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llmchaos import run
from llmchaos.cli import main
from tests.integration.replay_helpers import replay
from tests.procs import ROOT, serve

# Two sequences at a time, steps 3x the default profile's (vLLM's H100 pace would serve the flood
# without a queue): a queue builds as soon as the flood starts.
ENGINE = ("--sim-time-scale", "3", "--max-num-seqs", "2")


@pytest.mark.timing
def test_wfq_keeps_minority_languages_fast_under_an_english_flood(tmp_path):
    """Under an English flood, B's WFQ keeps Chinese and Japanese TTFT p99 under half of A's FCFS.

    Long (about 32 s here): two servers booted, the 12 s log replayed in real time to both, whose slowed engines
    (two sequences at a time, steps 3x) queue the flood, until every answer is in; then a compare."""
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
    compare = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "compare", str(run_dir), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert compare.returncode in (0, 1), compare.stderr  # the compare tool reads the replay's a/ and b/
    verdicts = json.loads(compare.stdout)
    assert verdicts["a"] == [str(run_dir / "a")]
    assert verdicts["b"] == [str(run_dir / "b")]
    cells = {
        c["lang"]: c for c in verdicts["cells"] if (c["metric"], c["stat"], c["phase"]) == ("ttft", "p99", "baseline")
    }
    for lang in ("zh", "ja"):
        assert cells[lang]["b"] < 0.5 * cells[lang]["a"], cells[lang]
