"""Events of megabytes: counting their tokens (about a second a MB) never holds back the user that
sent them, and a test stopped while they are being counted loses none of them."""

from __future__ import annotations

import itertools
import time

import httpx

from llmchaos import tokenizer
from tests.integration.loadtest_helpers import locust, only_run
from tests.servers import scripted

SIZE = 2_000_000  # bytes of the one huge event in each answer (2 s or so of counting)


def test_huge_events_are_counted_apart_and_none_is_lost_at_stop(tmp_path):
    with scripted.running(5, "--modes", f"en=huge:{SIZE}") as url:
        args = ("--host", url, "--results-dir", str(tmp_path), "-u", "1", "-r", "1", "-t", "4s")
        proc = locust(*args, "--langs", "en", "--max-tokens", "6", timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        answered = {r["request_id"] for r in httpx.get(url + "/truth", timeout=30).json()["requests"]}
    _, _, requests = only_run(tmp_path)
    assert answered <= {r["request_id"] for r in requests}  # every request the server saw is recorded
    assert all(r["outcome"] == "ok" or r["at_stop"] for r in requests), requests
    ok = sorted((r for r in requests if r["outcome"] == "ok"), key=lambda r: r["sent"])
    assert len(ok) >= 2
    for r in ok:
        assert r["output_tokens"] == r["usage_tokens"] == 5 + SIZE // 6
        assert sum(r["tokens_per_event"] or ()) == r["output_tokens"]
    # The user went on while its answers were counted: some request was sent sooner after the one
    # before it ended than counting one answer takes here (counted inline, each waited that long).
    started = time.perf_counter()
    tokenizer.count_batch([" lorem" * (SIZE // 6)])
    counting = time.perf_counter() - started
    went_on = min(b["sent"] - (a["intended"] + a["e2e"]) for a, b in itertools.pairwise(ok))
    assert went_on < counting / 2, (went_on, counting)
