"""A reasoning model's stream measured: the scripted server thinks first (its first K events are
`reasoning_content` deltas for en, vLLM's newer `reasoning` for de) and answers after; ja answers at
once. Per request, TTFT is the first token of any kind and time to first answer the first answer
token: their difference is the server's own time between those two writes; thinking counts in ITL
and output tokens, and apart, reconciled with the server's usage."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.integration.conftest import math_bound
from tests.integration.loadtest_helpers import locust, only_run, summary
from tests.noise import WakeNoise
from tests.procs import ROOT, serve
from tests.servers import scripted

pytestmark = pytest.mark.timing  # compares times per request

MAX_TOKENS = 12
THINKING = 3  # the scripted server's K: events that think before the answer
ARGS = ("-u", "6", "-r", "6", "-t", "8s", "--langs", "en,de,ja", "--max-tokens", str(MAX_TOKENS))


def test_thinking_is_measured_apart_and_within_the_tokens(tmp_path):
    modes = "en=think,de=think:reasoning"
    with scripted.running(3, "--modes", modes) as url, WakeNoise() as noise:
        proc = locust("--host", url, "--results-dir", str(tmp_path), *ARGS)
        assert proc.returncode == 0, proc.stderr[-3000:]
        truth = {r["request_id"]: r for r in httpx.get(url + "/truth", timeout=30).json()["requests"]}
    run, _, requests = only_run(tmp_path)
    table = {
        line.split()[0]: line.split() for line in proc.stderr.splitlines() if line.startswith(("lang ", "en ", "ja "))
    }
    assert table["lang"][-3:] == ["ttfa", "p50", "think/req"], table  # the summary printed at the end
    assert (table["en"][-1], table["ja"][-1]) == (f"{THINKING:.1f}", "-"), table
    ok = [r for r in requests if r["outcome"] == "ok"]
    assert {r["lang"] for r in ok} == {"en", "de", "ja"}
    tolerance = 0.001 + noise.worst  # the server's write times against the kernel's receive stamps
    for r in ok:
        t = truth[r["request_id"]]
        thinks = r["lang"] != "ja"
        assert r["output_tokens"] == MAX_TOKENS == len(r["gaps"]) + 1
        assert r["reasoning_tokens"] == (THINKING if thinks else None), r
        want = sum(t["gaps_s"][:THINKING]) if thinks else 0.0
        assert abs((r["ttfa"] - r["ttft"]) - want) <= tolerance, (r["ttfa"] - r["ttft"], want, r)
    for lang in ("en", "de", "ja"):
        mine = [r for r in ok if r["lang"] == lang and r["phase"] == "baseline"]
        assert summary(run, lang, "ttfa")["count"] == len(mine)
        assert summary(run, lang, "itl")["count"] == len(mine) * (MAX_TOKENS - 1)  # thinking's gaps too
        if lang == "ja":
            assert not [s for s in run["summaries"] if (s["lang"], s["metric"]) == ("ja", "reasoning_tokens")]
        else:
            thinking = summary(run, lang, "reasoning_tokens")
            assert (thinking["count"], thinking["p50"], thinking["max"]) == (len(mine), THINKING, THINKING)
            assert summary(run, lang, "ttfa")["p50"] > summary(run, lang, "ttft")["p50"]
    (run_dir,) = tmp_path.iterdir()
    page = tmp_path / "report.html"
    cmd = [sys.executable, "-m", "llmchaos.cli", "report", str(run_dir), "--html", str(page)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=120)
    assert "Time to first answer CDF per language" in page.read_text()


@pytest.mark.parametrize("api", ["openai-chat", "gemini"])
def test_the_reference_server_thinking_as_told(tmp_path, api):
    """`llmchaos serve` told to think 12 tokens first (the model `NAME-think-12`) on all-math 14 ms
    decode steps, one user: the first answer token comes 12 steps after the first token, and the
    harness's counts are the server's usage (Gemini's thoughts shown with --include-thoughts)."""
    think, step = 12, 0.014
    with serve("--profile", math_bound(tmp_path), "--pacer-rate", "0") as server, WakeNoise() as noise:
        args = ("--host", server.url, "--results-dir", str(tmp_path / "r"), "-u", "1", "-r", "1", "-t", "5s")
        model = ("--model", f"llmchaos-sim-8b-think-{think}", "--api", api, "--include-thoughts")
        proc = locust(*args, *model, "--langs", "en", "--max-tokens", "20")
        assert proc.returncode == 0, proc.stderr[-3000:]
    _, _, requests = only_run(tmp_path / "r")
    ok = [r for r in requests if r["outcome"] == "ok"]
    assert len(ok) >= 3
    first = min(r["ttft"] for r in ok)
    for r in ok:
        assert (r["reasoning_tokens"], r["output_tokens"], r["tokens_from"]) == (think, 20, "usage"), r
        # a first token later than the run's quickest (a busy machine) is caught up by the steps after it
        tolerance = 0.005 + noise.worst + (r["ttft"] - first)
        assert abs((r["ttfa"] - r["ttft"]) - think * step) <= tolerance, (r["ttfa"] - r["ttft"], tolerance, r)


def test_hidden_thinking_is_counted_and_left_out_of_itl_and_tpot(tmp_path):
    """Gemini without --include-thoughts: the server thinks 12 tokens unseen, then answers 8, one 14 ms
    step each. The usage counts 20 with 12 thoughts: output and reasoning tokens are the server's,
    and ITL and TPOT are the answer's own steps, not its 7 gaps spread over 19 tokens (issue 34, 9)."""
    think, step = 12, 0.014
    with serve("--profile", math_bound(tmp_path), "--pacer-rate", "0") as server, WakeNoise() as noise:
        args = ("--host", server.url, "--results-dir", str(tmp_path / "r"), "-u", "1", "-r", "1", "-t", "5s")
        model = ("--model", f"llmchaos-sim-8b-think-{think}", "--api", "gemini")
        proc = locust(*args, *model, "--langs", "en", "--max-tokens", "20")
        assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path / "r")
    ok = [r for r in requests if r["outcome"] == "ok"]
    assert len(ok) >= 3
    for r in ok:
        assert (r["output_tokens"], r["reasoning_tokens"], r["unstreamed_tokens"]) == (20, think, think), r
        assert len(r["gaps"]) == 20 - think - 1  # the answer's events only
    busy = 1 + noise.worst / step
    for metric in ("itl", "tpot"):
        p50 = summary(run, "en", metric)["p50"]
        assert step * 0.9 <= p50 <= step * 1.1 * busy, (metric, p50)  # hidden thinking spread: 7/19 of a step
