"""The seed's jitter drill end to end in the kernel lab (lab_drill.py): the reference server in one
namespace, one Locust process with 4 users in the other, netem delay 100ms jitter 30ms uniform on the
server side's egress for the schedule's one window. The window's TTFT p50 rises by about the mean
delay and its ITL spreads; the test prints the per-phase table the README quotes."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from tests.system import kernel_lab

pytestmark = [
    pytest.mark.skipif(kernel_lab.unavailable() is not None, reason=str(kernel_lab.unavailable())),
    pytest.mark.timing,
]


def table(out: dict) -> str:
    rows = {(s["phase"], s["metric"]): s for s in out["summaries"]}
    lines = [
        "| phase | requests | TTFT p50 | TTFT p90 | TTFT p99 | ITL p50 | ITL p90 | ITL p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for phase in ("baseline", "jitter-drill"):
        t, i = rows[(phase, "ttft")], rows[(phase, "itl")]
        ms = [f"{1000 * r[q]:.1f} ms" for r in (t, i) for q in ("p50", "p90", "p99")]
        lines.append(f"| {phase} | {t['count']} | " + " | ".join(ms) + " |")
    return "\n".join(lines)


def test_the_jitter_drill_delays_first_tokens_by_its_mean_and_spreads_the_tokens(tmp_path):
    """The drill's window raises TTFT p50 by about netem's 100 ms mean delay and spreads ITL's tail.

    Long (about 70 s here): it boots the kernel lab (one CPU), starts the server in it and runs 25 s of load there
    (10 s of baseline, the 10 s window, 5 s after): the window needs enough requests on each side of it."""
    command = f"{shlex.quote(sys.executable)} -m tests.system.lab_drill {tmp_path}/out.json"
    lab = kernel_lab.run(command, tmp_path, timeout=400)
    assert lab.returncode == 0, lab.failure()
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["returncode"] == 0, out["stderr"]
    (window,) = out["faults"]
    assert window["error"] is None
    assert out["journal"] == []  # reverted at the window's end
    rows = {(s["phase"], s["metric"]): s for s in out["summaries"]}
    base, drill = rows[("baseline", "ttft")], rows[("jitter-drill", "ttft")]
    rise = 1000 * (drill["p50"] - base["p50"])
    itl_base, itl_drill = rows[("baseline", "itl")], rows[("jitter-drill", "itl")]
    print(
        f"\njitter drill (delay 100ms jitter 30ms uniform, server egress), kernel {out['kernel']}, window applied "
        f"{window['actual_start'] - window['planned_start']:.2f} s after its planned start:\n{table(out)}\n"
        f"TTFT p50 rose {rise:.1f} ms"
    )
    assert 70 <= rise <= 160
    # chunks held back behind late packets (up to the jitter's 60 ms spread), then a burst
    assert itl_drill["p99"] > itl_base["p99"] + 0.03
