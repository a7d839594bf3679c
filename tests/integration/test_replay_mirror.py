"""Mirror: every request of the log sent to A and B at the same instant, measured at the two servers
by the kernel's receive time of each request's first bytes; the same request id on both sides'
requests.jsonl, and each pair's output tokens and whether the texts matched."""

from __future__ import annotations

import statistics

from llmchaos.cli import main
from tests.integration.replay_helpers import replay, sides
from tests.servers import stamped


def test_both_sides_get_each_request_within_a_millisecond(tmp_path):
    log = tmp_path / "synth.jsonl"
    args = ["--duration", "8s", "--rate", "15", "--sessions", "0", "--lang-mix", "en=1,de=1"]
    assert main(["logs", "synth", *args, "--out", str(log)]) == 0
    n = len(log.read_text().splitlines())
    with stamped.running() as a, stamped.running() as b:
        proc = replay(
            "--log", str(log), "--target-a", a.url, "--target-b", b.url, "--mirror", "--max-concurrency", "8",
            "--results-dir", str(tmp_path / "r"),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        at_a, at_b = dict(a.stamps), dict(b.stamps)
    out = sides(tmp_path / "r")
    ids = [{r["request_id"] for r in out[s].requests} for s in ("a", "b")]
    assert ids[0] == ids[1] == set(at_a) == set(at_b)
    assert len(ids[0]) == n
    gaps = sorted(abs(at_a[i] - at_b[i]) for i in ids[0])
    # Both sends go out back to back; a user's first request also opens its connection to each side,
    # which may cost one side a few ms on a busy machine.
    assert gaps[int(0.95 * len(gaps))] < 0.001, gaps[-10:]
    assert statistics.median(gaps) < 0.0005, gaps
    # both servers answer the same text: every pair identical, its tokens on both lines
    for s in ("a", "b"):
        assert all(r["replay"]["identical"] is True for r in out[s].requests)
        assert all(r["replay"]["peer_output_tokens"] == r["output_tokens"] == 3 for r in out[s].requests)
        pairs = out[s].run["replay"]["mirror"]
        assert {p["lang"] for p in pairs} == {"en", "de"}
        assert sum(p["pairs"] for p in pairs) == sum(p["identical"] for p in pairs) == n
        assert sum(p["output_tokens_a"] for p in pairs) == sum(p["output_tokens_b"] for p in pairs) == 3 * n
