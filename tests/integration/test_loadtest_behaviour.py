"""Coordinated omission, misbehaving targets, and the Prometheus export, with real Locust."""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import threading
import time

import httpx
import pytest

from llmchaos import languages
from tests.integration.loadtest_helpers import LOCUST, locust, only_run, summary
from tests.procs import ROOT, free_port
from tests.servers import scripted
from tests.services import prometheus, pushgateway

STALL_S = 2.0


def stall_after(url: str, requests: int, seconds: float) -> threading.Thread:
    """Stall the scripted server for `seconds` once it has finished `requests` requests (the load is
    under way, however long Locust took to start)."""

    def wait_then_stall() -> None:
        deadline = time.monotonic() + 60
        while len(httpx.get(url + "/truth").json()["requests"]) < requests and time.monotonic() < deadline:
            time.sleep(0.05)
        httpx.post(url + "/control", json={"stall_for_s": seconds})

    thread = threading.Thread(target=wait_then_stall, daemon=True)
    thread.start()
    return thread


@pytest.mark.timing
def test_open_loop_latency_from_intended_start_shows_the_stall(tmp_path):
    """A 2 s server stall under a 20 req/s open loop capped at 6 in flight: every request due in the
    stall waits it out from its intended start; the ones the cap held back look fast from their send."""
    with scripted.running(3, "--itl-ms", "5", "10") as url:
        stall = stall_after(url, 40, STALL_S)
        proc = locust(
            "--host",
            url,
            "--results-dir",
            str(tmp_path),
            "-u",
            "6",
            "-r",
            "6",
            "-t",
            "10s",
            "--langs",
            "en",
            "--rate",
            "20",
            "--arrival",
            "constant",
            "--max-tokens",
            "5",
        )
        stall.join()
        window = httpx.get(url + "/control").json()
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    start, end = window["stall_start_unix"], window["stall_end_unix"]
    due = [r for r in requests if start <= r["intended"] < end - 0.1 and r["outcome"] == "ok"]
    assert len(due) >= 30  # 20 req/s over the 2 s window
    for r in due:  # latency from the intended start covers the rest of the stall
        assert r["ttft"] >= end - r["intended"] - 0.01, r
    held_back = [r for r in due if r["sent"] >= end]
    assert len(held_back) >= len(due) - 7  # the cap (6 users) let at most 6 out during the stall
    from_send = [r["ttft"] - r["schedule_lag"] for r in held_back]
    assert statistics.median(from_send) < STALL_S / 4 < statistics.median(r["ttft"] for r in held_back)
    # run.json keeps both: corrected (from intended start) and from the actual send.
    assert summary(run, "en", "ttft")["p99"] > 0.75 * STALL_S > summary(run, "en", "ttft_sent")["p90"]
    assert summary(run, "en", "schedule_lag")["max"] > 0.75 * STALL_S


MODES = {
    "de=cut,fr=garbage,es=wrong_content_type,it=status:429,pt=never_ending,zh=stall:5,ja=bad_json": {
        "en": "ok",
        "de": "truncated",
        "fr": "malformed",
        "es": "malformed",
        "it": "rate_limited",
        "pt": "timeout",
        "zh": "stalled",
        "ja": "malformed",
    },
    "en=error_event,de=bad_utf8,fr=no_done,es=status:503": {
        "en": "http_500",
        "de": "malformed",
        "fr": "truncated",
        "es": "http_503",
    },
}


@pytest.mark.parametrize("modes", MODES)
def test_misbehaving_target_is_classified_and_the_run_completes(tmp_path, modes):
    expected = MODES[modes]
    with scripted.running(5, "--itl-ms", "5", "10", "--modes", modes) as url:
        proc = locust(
            "--host",
            url,
            "--results-dir",
            str(tmp_path),
            "-u",
            str(2 * len(expected)),
            "-r",
            "50",
            "-t",
            "6s",
            "--langs",
            ",".join(expected),
            "--max-tokens",
            "10",
            "--stall-limit",
            "1",
            "--request-timeout",
            "2.5",
        )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: Locust's exit code when requests failed
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    for lang, outcome in expected.items():
        seen = {o["outcome"] for o in run["outcomes"] if o["lang"] == lang} - {"cancelled"}
        assert seen == {outcome}, (lang, seen)
    assert all(r["error"] for r in requests if r["outcome"] not in ("ok", "cancelled"))


def test_prometheus_scrapes_the_master_and_the_pushgateway_keeps_the_run(tmp_path):
    port = free_port()
    with (
        scripted.running(9, "--itl-ms", "5", "10") as url,
        pushgateway() as gw,
        prometheus([f"127.0.0.1:{port}", gw.split("//")[1]]) as prom,
    ):
        loc = subprocess.Popen(
            [
                *LOCUST,
                "--host",
                url,
                "--results-dir",
                str(tmp_path),
                "-u",
                "8",
                "-r",
                "8",
                "-t",
                "12s",
                "--langs",
                "en,de",
                "--max-tokens",
                "8",
                "--prometheus-port",
                str(port),
                "--push-gateway",
                gw,
                "--push-interval",
                "2",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            live = prom.wait_for(
                f'sum(llmchaos_requests_total{{instance="127.0.0.1:{port}",outcome="ok"}})',
                lambda res: bool(res) and float(res[0]["value"][1]) > 0,
                timeout=15,
            )
            assert float(live[0]["value"][1]) > 0
        finally:
            _, err = loc.communicate(timeout=60)
        assert loc.returncode == 0, err[-3000:]
        run, _, _ = only_run(tmp_path)
        want = {lang: summary(run, lang, "ttft")["count"] for lang in ("en", "de")}
        pushed = prom.wait_for(
            f'llmchaos_ttft_seconds_count{{run_id="{run["run_id"]}"}}',
            lambda res: (
                {r["metric"]["lang"]: float(r["value"][1]) for r in res} == {k: float(v) for k, v in want.items()}
            ),
            timeout=20,
        )
        assert {r["metric"]["phase"] for r in pushed} == {"baseline"}
        # Buckets carry vLLM's edges and the registry's SLO thresholds.
        text = httpx.get(gw + "/metrics").text
        edges = {float(m) for m in re.findall(r'llmchaos_ttft_seconds_bucket\{[^}]*le="([^"]+)"', text) if m != "+Inf"}
        assert {languages.get("de").slo["ttft_p99_ms"] / 1000, 0.005, 2560.0} <= edges
        median = prom.query(
            f'histogram_quantile(0.5, sum by (le) (llmchaos_ttft_seconds_bucket{{run_id="{run["run_id"]}",lang="en"}}))'
        )
        exact = summary(run, "en", "ttft")["p50"]
        assert 0.5 * exact < float(median[0]["value"][1]) < 2 * exact  # bucket interpolation, same order
        # Deleting the run's group on request.
        rc = subprocess.run(
            [sys.executable, "-m", "llmchaos.cli", "push-delete", "--gateway", gw, "--run-id", run["run_id"]],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert rc.returncode == 0, rc.stderr
        time.sleep(0.2)
        assert run["run_id"] not in httpx.get(gw + "/metrics").text
