"""A target that streams faster than the harness can judge: the generator reads only as far ahead as
it judges (TCP holds the target back), its memory stays that of what it judged, and the stop ends
the stream in flight at once, on either plane."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loadtests.dataplane import native
from loadtests.dataplane.response import MAX_BODY
from tests.integration.loadtest_helpers import _cmd, only_run
from tests.procs import ROOT
from tests.servers import flood

RUN_S = 5
TAKE_EVENTS = 4096  # _native.c's: events held for Python before it reads no more
READ = 65536  # the most one read of either plane takes
MOST_RSS = 1 << 30  # bytes: a generator that reads ahead of its judging grows by GBs in seconds


def _tcp_buffers() -> int:
    """The most the kernel's socket buffers of one loopback connection hold, both ends."""
    most = [int(Path(f"/proc/sys/net/ipv4/tcp_{k}").read_text().split()[2]) for k in ("rmem", "wmem")]
    return sum(most)


def _locust_peak_rss(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """Run Locust under a parent of its own, whose children's peak RSS is Locust's alone (bytes)."""
    parent = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", parent, *_cmd("loadtests/locustfile.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    return proc, int(proc.stderr.strip().splitlines()[-1]) * 1024


@pytest.mark.parametrize("plane", ["native", "python"])
def test_an_endless_fast_stream_is_read_as_far_as_judged_and_cut_at_the_stop(plane, tmp_path, monkeypatch):
    if plane == "native" and not native.available():
        pytest.skip("the native plane is not built")
    monkeypatch.setenv("LLMCHAOS_PLANE", plane)
    with flood.running() as server:
        args = ("--host", server.url, "--results-dir", str(tmp_path), "-u", "1", "-r", "1", "-t", f"{RUN_S}s")
        proc, peak = _locust_peak_rss(*args, "--langs", "en")
        assert proc.returncode == 0, proc.stderr[-3000:]
        (sent,) = server.sent  # one request: it never ends by itself
    _, _, (req,) = only_run(tmp_path)
    assert (req["outcome"], req["at_stop"]) == ("cancelled", True)
    assert req["error"].startswith("test stopped before its ")
    assert req["error"].endswith(" (in flight)")
    judged = len(req["gaps"]) + 1
    assert judged > 10 * TAKE_EVENTS  # it flowed: what follows is about reading ahead, not about a trickle
    # What the target wrote and the generator never judged is what the sockets' buffers and one
    # plane's batch hold: the generator did not read on ahead of its judging.
    ahead = sent - judged
    assert ahead * len(flood.EVENT) <= _tcp_buffers() + 2 * READ + TAKE_EVENTS * len(flood.EVENT), (sent, judged)
    assert peak < MOST_RSS, peak


@pytest.mark.parametrize("plane", ["native", "python"])
def test_an_endless_whole_answer_is_malformed_past_its_cap_and_let_go(plane, tmp_path, monkeypatch):
    """`--no-stream` against a 200 whose JSON never ends: each answer is held to MAX_BODY, then judged
    malformed and dropped, well before the request's timeout; the generator does not grow with it."""
    if plane == "native" and not native.available():
        pytest.skip("the native plane is not built")
    monkeypatch.setenv("LLMCHAOS_PLANE", plane)
    with flood.running() as server:
        args = ("--host", server.url, "--results-dir", str(tmp_path), "-u", "1", "-r", "1", "-t", f"{RUN_S}s")
        proc, peak = _locust_peak_rss(*args, "--langs", "en", "--no-stream", "--exit-code-on-error", "0")
        assert proc.returncode == 0, proc.stderr[-3000:]
        sent = server.sent
    _, _, requests = only_run(tmp_path)
    ended = [r for r in requests if not r["at_stop"]]
    assert len(ended) >= 2, requests  # answers passed the cap one after another, each long before its timeout
    assert {(r["outcome"], r["error"]) for r in ended} == {("malformed", f"body over {MAX_BODY >> 20} MiB")}
    assert min(sent[: len(ended)]) >= MAX_BODY // 65536  # each was read to the cap (64 KiB of text a chunk)
    assert peak < MOST_RSS, peak
