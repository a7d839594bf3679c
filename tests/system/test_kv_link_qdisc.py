"""The KV cache's bytes are real: a kernel tbf on the loopback the cluster's engines share slows the
transfer itself, and so decode's first token, by what the KV's bytes take at that rate (the API's
few bytes go through it too). The cluster runs in a network namespace this test creates, with
everything it starts. This kernel has no sch_prio, which a `match` on the KV port needs; the steering
itself is held by the qdisc tests' own cases where a kernel has it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.procs import ROOT
from tests.system.netns import in_netns, veth_pair

DRILL = """
import json, sys, time, httpx
from faults.injectors.tbf import Tbf
from tests.procs import serve

ns = sys.argv[1]
body = {"model": "llmchaos-sim-8b", "messages": [{"role": "user", "content": "the same words again " * 60}],
        "max_tokens": 2, "stream": True}

def ttfts(url, n=5):
    out = []
    for _ in range(n):
        start = time.monotonic()
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as r:
            assert r.status_code == 200 and r.headers["x-llmchaos-kv"] == "pulled", r.read()
            lines = r.iter_lines()
            next(lines)
            out.append(time.monotonic() - start)
            list(lines)
    return sorted(out)[n // 2]

with serve("--disaggregate", "1:1", "--kv-bytes-scale", "0.05", "--admin-token", "t") as s:
    free = ttfts(s.url)
    bytes_before = s.metric("llmchaos_kv_transfer_bytes_total")
    tbf = Tbf({"netns": ns, "interface": "lo"})
    # a burst past loopback's 64 KiB packets (tbf drops any larger), a queue that holds the KV (no TCP timeout)
    params = {"rate": "16mbit", "burst": 131072, "latency": "5s"}
    tbf.apply("kv-slow", params, {})
    try:
        shaped = ttfts(s.url)
    finally:
        tbf.revert({})
    sent = (s.metric("llmchaos_kv_transfer_bytes_total") - bytes_before) / 2 / 5  # each side counts each byte
    print(json.dumps({"free": free, "shaped": shaped, "bytes": sent, "after": ttfts(s.url, 3)}))
"""


@pytest.mark.timing
def test_a_tbf_on_the_kv_port_slows_the_transfer_by_its_bytes_at_the_rate():
    with veth_pair() as (a, _b, _addr_a, _addr_b):
        proc = subprocess.run(
            [sys.executable, "-c", DRILL, a],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=in_netns(a),
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    at_rate = got["bytes"] * 8 / 16e6  # one transfer's bytes at 16 Mbit/s
    assert at_rate > 0.5, got  # the prompt's KV at 5 %: enough to see the rate
    # the first token waits for the whole KV: at least what its bytes take at the rate (less the burst
    # tbf lets through at once), and not much more than that over the unshaped first token
    assert got["shaped"] > 0.8 * at_rate, (got, at_rate)
    assert got["shaped"] - got["free"] < 1.5 * at_rate + 0.2, (got, at_rate)
    assert got["after"] < got["free"] + 0.2 * at_rate, got  # reverted: as fast as before
