"""Every reader of a run reproduces its ITL: a run whose events carry several tokens each (the
scripted server's `multi` mode) keeps each event's share in requests.jsonl, so the percentiles a
comparison computes from the requests are the run's histograms' (to their 0.1 % resolution), where
spreading each request's tokens evenly over its events was not."""

from __future__ import annotations

import numpy as np

from dashboards.comparison.runs import load
from dashboards.comparison.sample import PCTS, nearest_rank
from llmchaos import run
from tests.integration.loadtest_helpers import locust
from tests.servers import scripted

RESOLUTION = 0.001  # the histograms' relative precision (3 significant digits)


def test_compare_reads_the_itl_the_histograms_hold(tmp_path):
    with scripted.running(7, "--modes", "en=multi,de=multi") as url:
        proc = locust(
            "--host", url, "--langs", "en,de", "-u", "6", "-r", "6", "-t", "6s", "--max-tokens", "12",
            "--results-dir", str(tmp_path),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = tmp_path.iterdir()
    lines = [r for r in run.load(run_dir).requests() if r.outcome == "ok"]
    assert lines
    assert all(r.tokens_per_event is not None for r in lines)  # several tokens an event, kept
    assert all(sum(r.tokens_per_event or []) == r.output_tokens for r in lines)
    loaded = load(run_dir)
    hist = loaded.results.histograms
    itl = loaded.columns.metrics["itl"]
    even_off = 0
    for i, (lang, phase) in enumerate(loaded.columns.cells):
        mine = itl.cell == i
        h = hist.combined("itl", lang=lang, phase=phase)
        assert h is not None
        assert h.count == int(itl.w[mine].sum()), (lang, phase)
        ours = nearest_rank(itl.v[mine], itl.w[mine], PCTS)
        for name, pct in PCTS.items():
            want = h.quantile(pct)
            assert abs(ours[name] - want) <= RESOLUTION * want + 1e-6, (lang, phase, name, ours[name], want)
        spread = [
            (gap / max(1.0, r.output_tokens / (len(r.gaps) + 1)), max(1.0, r.output_tokens / (len(r.gaps) + 1)))
            for r in lines
            if (r.lang, r.phase) == (lang, phase)
            for gap in r.gaps
        ]
        v, w = (np.array(x) for x in zip(*spread, strict=True))
        even = nearest_rank(v, w, PCTS)
        even_off += sum(abs(even[n] - h.quantile(p)) > RESOLUTION * h.quantile(p) + 1e-6 for n, p in PCTS.items())
    assert even_off  # the even split, what readers did before, misses some of them
