"""Events of megabytes: counting their tokens (about a second a MB) never holds back the user that
sent them, and a test stopped while they are being counted loses none of them."""

from __future__ import annotations

import httpx

from tests.integration.loadtest_helpers import locust, only_run
from tests.servers import scripted

SIZE = 2_000_000  # bytes of the one huge event in each answer (2 s or so of counting)
MAX_ENDING = 4  # loadtests.harness's (this process must not import locust)


def test_huge_events_are_counted_apart_and_none_is_lost_at_stop(tmp_path):
    with scripted.running(5, "--modes", f"en=huge:{SIZE}") as url:
        args = ("--host", url, "--results-dir", str(tmp_path), "-u", "1", "-r", "1", "-t", "4s")
        proc = locust(*args, "--langs", "en", "--max-tokens", "6", timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        answered = {r["request_id"] for r in httpx.get(url + "/truth", timeout=30).json()["requests"]}
    _, _, requests = only_run(tmp_path)
    ok = [r for r in requests if r["outcome"] == "ok"]
    assert answered <= {r["request_id"] for r in ok}  # every answer the server finished is recorded
    # one user went on while earlier answers were counted: more than one at a time
    assert len(ok) > MAX_ENDING
    for r in ok:
        assert r["output_tokens"] == r["usage_tokens"] == 5 + SIZE // 6
        assert sum(r["tokens_per_event"] or ()) == r["output_tokens"]
