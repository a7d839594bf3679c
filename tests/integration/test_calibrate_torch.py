"""`llmchaos calibrate` on a server we can run here: a real transformer on this CPU (`llmchaos serve
--engine torch`), measured through our own replay at two load levels and its /metrics scraped around
each; the fitted profile then serves a held-out third level through `llmchaos serve --profile` (the
sim), and its TTFT p50 and per-token p50 (TPOT) come within 15 % of what the torch server measured.

The torch server's own step times wander on a busy machine (a shared CPU: the same level measured
twice a minute apart differed by half), so the held-out level is measured before and after the
others, and the prediction may also be off by as much as those two measurements are from each
other: on a quiet machine that spread is a few percent and the target is the 15 %. The prediction
may also be over by what the HTTP path and the harness take on this machine at the time, measured
against a server whose steps are free: the fit learned it inside the torch server's times and the
sim's run pays it again (a few ms on a quiet machine; tens with a CPU hog on each core)."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from llmchaos import run
from tests.integration.conftest import TORCH
from tests.integration.replay_helpers import replay
from tests.procs import ROOT, Server, serve

pytestmark = pytest.mark.timing

FITTED, HELD_OUT = (4.0, 24.0), 12.0  # requests/s
SECONDS, WARM_UP, PROMPT, OUTPUT = 8.0, 3.0, 120, 32
TOLERANCE = 0.15
FIRST = itertools.count(0, 100_000)  # each level's first hash id


def write_log(path: Path, rate: float, first: int, seconds: float) -> Path:
    """Poisson arrivals at `rate` for `seconds`; every prompt its own (a hash id of its own: no prefix cache hit, not
    even on a prompt of another level's log)."""
    rng, t, n = random.Random(int(rate)), 0.0, first
    with open(path, "w") as f:
        while (t := t + rng.expovariate(rate)) < seconds:
            f.write(
                f'{{"ts":{t:.6f},"user_id":"u{n}","lang":"en","input_tokens":{PROMPT},"output_tokens":{OUTPUT},'
                f'"hash_ids":[{n}],"block_tokens":{PROMPT}}}\n'
            )
            n += 1
    return path


def level(server: Server, rate: float, tmp: Path, seconds: float = SECONDS) -> tuple[Path, Path, Path]:
    """One level replayed against `server` (a log of `seconds`): its results directory and the scrapes
    before and after."""
    where = Path(tempfile.mkdtemp(prefix=f"{rate:g}-", dir=tmp))
    before, after = where / "before.prom", where / "after.prom"
    before.write_text(server.scrape())
    proc = replay(
        "--log", str(write_log(where / "log.jsonl", rate, next(FIRST), seconds)), "--target-a", server.url,
        "--force-output-length",
        "--max-concurrency", "500", "--results-dir", str(where / "results"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    after.write_text(server.scrape())
    (run_dir,) = [p for p in (where / "results").iterdir() if p.is_dir()]
    return run_dir / "a", before, after


def stats(side: Path) -> tuple[float, float]:
    """TTFT p50 and TPOT p50 of a run, read through the run model."""
    ok = [r for r in run.load(side).requests() if r.outcome == "ok"]
    assert len(ok) >= 20, len(ok)
    ttft = [r.ttft for r in ok]
    tpot = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in ok]  # type: ignore[operator]
    return float(np.median(ttft)), float(np.median(tpot))


def test_a_profile_calibrated_on_two_torch_levels_predicts_a_third(tmp_path):
    """A profile fitted on the torch server at 4 and 24 requests/s predicts its TTFT and TPOT p50 at 12 requests/s.

    Long (about 90 s here): seven replays of an 8 s log (five against the torch server, whose transformer runs on
    this CPU: a 3 s warm-up, the held-out level twice and the two fitted ones; one against the fitted sim and
    one against a free server), and a fit of 150 evaluations in between."""
    with serve(*TORCH) as torch_server:
        level(torch_server, FITTED[0], tmp_path, WARM_UP)  # a warm-up: the first level on a fresh server
        before = level(torch_server, HELD_OUT, tmp_path)
        runs = {rate: level(torch_server, rate, tmp_path) for rate in FITTED}
        after = level(torch_server, HELD_OUT, tmp_path)
    fitted = tmp_path / "fitted.yaml"
    argv = [sys.executable, "-m", "llmchaos.cli", "calibrate", *(str(runs[r][0]) for r in FITTED)]
    argv += ["--holdout", str(before[0]), str(after[0]), "--out", str(fitted), "--evals", "150"]
    for scrapes in (*(runs[r][1:] for r in FITTED), before[1:], after[1:]):
        argv += ["--metrics", *map(str, scrapes)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert " held " in proc.stdout, proc.stdout
    assert f"wrote {fitted}" in proc.stdout
    with serve("--profile", str(fitted)) as sim:
        predicted = stats(level(sim, HELD_OUT, tmp_path)[0])
    # What the HTTP path and the harness take on this machine now (a server whose steps are free): the
    # fit learned it inside the torch server's times, and the sim's own run pays it again.
    with serve("--sim-time-scale", "0") as free:
        path = stats(level(free, HELD_OUT, tmp_path)[0])
    first, second = stats(before[0]), stats(after[0])
    for name, p, a, b, twice in zip(("TTFT p50", "TPOT p50"), predicted, first, second, path, strict=True):
        measured, spread = (a + b) / 2, abs(a - b)
        room = TOLERANCE * measured + spread
        assert measured - room <= p <= measured + room + twice, (name, p, a, b, twice, proc.stdout)
