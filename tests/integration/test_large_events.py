"""Events of megabytes: counting their tokens (about a second a MB) never holds back the user that
sent them, and the stop never waits for it: every request is recorded, those still being counted
cut at the stop."""

from __future__ import annotations

import itertools
import time

import httpx

from llmchaos import tokenizer
from tests.integration.loadtest_helpers import locust, only_run
from tests.servers import scripted

SIZE = 2_000_000  # bytes of the one huge event in each answer (1 s or so of counting; 3 on a busy machine)
RUN_S = 8  # some answers counted whole, on a busy machine too


def test_huge_events_are_counted_apart_and_the_stop_waits_for_none(tmp_path):
    with scripted.running(5, "--modes", f"en=huge:{SIZE}") as url:
        args = ("--host", url, "--results-dir", str(tmp_path), "-u", "1", "-r", "1", "-t", f"{RUN_S}s")
        proc = locust(*args, "--langs", "en", "--max-tokens", "6", timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        answered = {r["request_id"] for r in httpx.get(url + "/truth", timeout=30).json()["requests"]}
    run, _, requests = only_run(tmp_path)
    assert answered <= {r["request_id"] for r in requests}  # every request the server saw is recorded
    ok = [r for r in requests if r["outcome"] == "ok"]
    cut = [r for r in requests if r["error"] and "characters were counted (ended ok)" in r["error"]]
    assert all(r["outcome"] == "ok" or r["at_stop"] for r in requests), requests
    # Those counted before the stop are exact. (The counting thread runs at the lowest priority: on a
    # machine whose every core is busy it may count none before the stop, and every request is cut.)
    for r in ok:
        assert r["output_tokens"] == r["usage_tokens"] == 5 + SIZE // 6
        assert sum(r["tokens_per_event"] or ()) == r["output_tokens"]
    for r in cut:  # the server's figure stays; what was never counted is not made up
        assert (r["outcome"], r["at_stop"], r["usage_tokens"], r["own_tokens"]) == ("cancelled", True, 5 + SIZE // 6, 0)
        assert r["tokens_per_event"] is None
    started = time.perf_counter()
    tokenizer.count_batch([" lorem" * (SIZE // 6)])
    counting = time.perf_counter() - started
    # The user went on while its answers were counted: some request was sent sooner after the one
    # before it ended than counting one answer takes here (counted inline, each waited that long).
    ended = sorted((r for r in requests if r["e2e"] is not None), key=lambda r: r["sent"])
    went_on = min(b["sent"] - (a["intended"] + a["e2e"]) for a, b in itertools.pairwise(ended))
    assert went_on < counting / 2, (went_on, counting)
    # The stop waited for none of them: had it counted those it cut, it would have gone on for the
    # counts queued behind the one under way; the run outlasted its -t by less.
    assert len(cut) >= 3, requests
    assert run["duration_s"] - RUN_S < (len(cut) - 1) * counting, (run["duration_s"], len(cut), counting)
