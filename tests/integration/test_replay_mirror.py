"""Mirror: every request of the log sent to A and B back to back, measured at the two servers by the
kernel's receive time of each request's first bytes; the same request id on both sides'
requests.jsonl, and each pair's output tokens and whether the texts matched."""

from __future__ import annotations

import pytest

from llmchaos.cli import main
from tests.integration.replay_helpers import replay, sides
from tests.servers import stamped


@pytest.mark.timing
def test_both_sides_get_each_request_before_either_answers(tmp_path):
    """Both copies of a request go out back to back: neither waits for the other side's answer. Each
    server holds its answer half a second and notes when it sent it, so a copy that waited would
    arrive after its twin's answer, whatever the machine's speed. (How close the two arrive, within
    a millisecond at p95 on a quiet machine, is a figure of benchmarks/replay_fidelity.py.)"""
    log = tmp_path / "synth.jsonl"
    args = ["--duration", "8s", "--rate", "15", "--sessions", "0", "--lang-mix", "en=1,de=1"]
    assert main(["logs", "synth", *args, "--out", str(log)]) == 0
    n = len(log.read_text().splitlines())
    with stamped.running(hold=0.5) as a, stamped.running(hold=0.5) as b:
        proc = replay(
            "--log", str(log), "--target-a", a.url, "--target-b", b.url, "--mirror", "--max-concurrency", "32",
            "--results-dir", str(tmp_path / "r"),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
    out = sides(tmp_path / "r")
    ids = [{r["request_id"] for r in out[s].requests} for s in ("a", "b")]
    assert ids[0] == ids[1] == set(a.stamps) == set(b.stamps)
    assert len(ids[0]) == n
    late = [i for i in ids[0] if not (b.stamps[i] < a.answered[i] and a.stamps[i] < b.answered[i])]
    assert not late, [(a.stamps[i], a.answered[i], b.stamps[i], b.answered[i]) for i in late[:5]]
    # both servers answer the same text: every pair identical, its tokens on both lines
    for s in ("a", "b"):
        assert all(r["replay"]["identical"] is True for r in out[s].requests)
        assert all(r["replay"]["peer_output_tokens"] == r["output_tokens"] == 3 for r in out[s].requests)
        pairs = out[s].run["replay"]["mirror"]
        assert {p["lang"] for p in pairs} == {"en", "de"}
        assert sum(p["pairs"] for p in pairs) == sum(p["identical"] for p in pairs) == n
        assert sum(p["output_tokens_a"] for p in pairs) == sum(p["output_tokens_b"] for p in pairs) == 3 * n
