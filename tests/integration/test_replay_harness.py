"""A replay is a load test like the others: a fault schedule (here an SSE first-token delay on B's
proxy) tags B's requests with the window they ran in, warmup and SLO files apply, and the metrics
pushed to a Pushgateway carry each side's requests under its own `target` label."""

from __future__ import annotations

import httpx
import pytest

from llmchaos.cli import main
from tests.integration.replay_helpers import replay, sides
from tests.integration.test_sse_proxy import FAULT, proxy
from tests.procs import serve
from tests.services import pushgateway


@pytest.mark.timing
def test_faults_warmup_slo_and_metrics_per_target(tmp_path):
    log = tmp_path / "synth.jsonl"
    synth = ["--duration", "12s", "--rate", "8", "--sessions", "0", "--output-median", "6", "--lang-mix", "en=1,de=1"]
    assert main(["logs", "synth", "--tokens-only", *synth, "--out", str(log)]) == 0
    slo = tmp_path / "slo.yaml"
    slo.write_text("en:\n  ttft_p99_ms: 0.001\n")  # nothing meets it: --check-slo makes the run exit 1
    with serve("--sim-time-scale", "0.3") as a, serve("--sim-time-scale", "0.3") as b, proxy(b.url) as p:
        schedule = tmp_path / "schedule.yaml"
        schedule.write_text(f"""faults:
  - name: first-token-delay
    kind: sse
    target: {{proxy: "{p.split("//")[1]}"}}
    at: 5s
    duration: 4s
    params: {{first_event_delay: 0.3}}
""")
        with pushgateway() as gw:
            proc = replay(
                "--log", str(log), "--target-a", a.url, "--target-b", p, "--split", "50", "--warmup", "2s",
                "--slo", str(slo), "--check-slo", "--schedule", str(schedule), "--fault-journal",
                str(tmp_path / "journal.json"), "--push-gateway", gw, "--results-dir", str(tmp_path / "r"),
            )  # fmt: skip
            pushed = httpx.get(gw + "/metrics").text
        assert httpx.get(p + FAULT).json()["active"] is False  # reverted at the end
    assert proc.returncode == 1, proc.stderr[-3000:]  # the impossible en SLO failed, as asked
    out = sides(tmp_path / "r")
    a_phases = {r["phase"] for r in out["a"].requests}
    b_phases = {r["phase"] for r in out["b"].requests}
    assert a_phases == {"warmup", "baseline", "first-token-delay"}  # phases are the run's, on every side
    assert b_phases == a_phases
    delayed = [r["ttft"] for r in out["b"].requests if r["phase"] == "first-token-delay"]
    assert min(delayed) > 0.3  # B's proxy held each first event 0.3 s
    undelayed = [r["ttft"] for r in out["a"].requests if r["phase"] == "first-token-delay"]
    assert max(undelayed) < 0.3  # A had no fault
    for side in out.values():
        assert [w["name"] for w in side.run["faults"]] == ["first-token-delay"]
        (en,) = [row for row in side.run["slo"] if row["lang"] == "en"]
        assert en["pass"] is False
        assert {c["slo"]: c["threshold_ms"] for c in en["checks"]}["ttft_p99_ms"] == 0.001  # the file's
    # the generator's stream reads, counted as the locustfile counts them (issue 18, defect 5: a replay
    # wrote reads 0, its validity check off): one generator for both sides, so each side's run.json
    # holds its totals, per phase
    reads = sum(r["reads"] for side in out.values() for r in side.requests)
    assert reads > 0
    for side in out.values():
        assert side.run["reads"]["reads"] == reads
        assert {p["phase"] for p in side.run["reads"]["phases"]} == a_phases
    run_id = out["a"].run["run_id"]
    for url in (a.url, p):
        series = [
            line
            for line in pushed.splitlines()
            if line.startswith("llmchaos_requests_total{") and f'target="{url}"' in line and 'outcome="ok"' in line
        ]
        assert series, url
        assert all(f'run_id="{run_id}"' in line for line in series)
