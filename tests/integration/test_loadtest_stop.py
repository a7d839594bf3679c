"""How a Locust run ends: the requests the end of the test cuts short, SIGTERM, and the last
records of a single process."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import httpx
import pytest

from llmchaos import slo
from tests.integration.loadtest_helpers import LOCUST, distributed, locust, only_run
from tests.procs import ROOT, serve
from tests.servers import scripted


def test_a_language_whose_only_request_the_end_cut_has_no_verdict_and_its_own_exit_status(tmp_path):
    # issue 18, defect 10: --check-slo said "ok% 0.0 ... FAIL" and exit 1 for a language with nothing issued
    with scripted.running(4, "--itl-ms", "500", "500") as url:  # a request of 50 s, cut by -t 3s
        proc = locust(
            "--host", url, "--results-dir", str(tmp_path / "results"), "-u", "1", "-r", "1", "-t", "3s",
            "--langs", "de", "--max-tokens", "100", "--check-slo",
        )  # fmt: skip
    assert proc.returncode == slo.NO_DATA, proc.stderr[-3000:]
    run, _, _ = only_run(tmp_path / "results")
    (row,) = run["slo"]
    assert (row["issued"], row["cancelled_at_stop"], row["pass"]) == (0, 1, None)
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("de ")]
    assert line.split()[3] == "-"
    assert line.endswith("no data")
    # a 3 s run: the figures its few samples could not judge are said, in run.json and at the end
    (gen,) = run["generator"].values()
    unseen = [f"CPU ({gen['cpu_samples']} samples, needs 2)"] if gen["cpu_samples"] < 2 else []
    unseen += [f"loop lag ({gen['loop_lag_samples']} samples, needs 20)"] if gen["loop_lag_samples"] < 20 else []
    assert run["validity"]["unjudged"] == ([f"{next(iter(run['generator']))}: " + ", ".join(unseen)] if unseen else [])
    assert ("validity not judged on: " in proc.stdout + proc.stderr) == bool(unseen)


@pytest.mark.parametrize("mode", ["one process", "master and two workers"])
def test_requests_cut_by_the_end_of_the_test_are_counted_apart(tmp_path, mode):
    """Every user is mid-stream when -t ends (but one that had just finished a request and not yet
    sent the next): those requests are cancelled at stop, reported apart and out of the
    denominators, so a clean run is 100 % ok and meets a generous SLO. The server's own list says
    which it saw and which the client left mid-stream: every one of them is in the results."""
    slo = tmp_path / "slo.yaml"
    slo.write_text("en:\n  ttft_p99_ms: 60000\n  itl_p99_ms: 60000\n")
    with scripted.running(4, "--itl-ms", "40", "60") as url:  # requests of 3 s, the second round cut
        proc = (locust if mode == "one process" else distributed)(
            "--host",
            url,
            "--results-dir",
            str(tmp_path / "results"),
            "-u",
            "6",
            "-r",
            "6",
            "-t",
            "5s",
            "--langs",
            "en",
            "--max-tokens",
            "60",
            "--slo",
            str(slo),
            "--check-slo",
        )
        seen = {r["request_id"]: r["disconnected"] for r in httpx.get(url + "/truth").json()["requests"]}
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path / "results")
    cut = [r for r in requests if r["outcome"] == "cancelled"]
    assert 1 <= len(cut) <= 6, proc.stderr[-3000:]  # at most one per user
    assert all(r["at_stop"] for r in cut)
    outcome = {r["request_id"]: r["outcome"] for r in requests}
    assert seen.keys() <= outcome.keys()  # no request the server saw is missing
    assert all(outcome[i] == "cancelled" for i, left in seen.items() if left)
    assert all(seen[i] is False for i, o in outcome.items() if o == "ok")  # each answered to the end
    ok = [r for r in requests if r["outcome"] == "ok"]
    assert len(ok) + len(cut) == len(requests)
    (row,) = run["slo"]
    assert (row["issued"], row["attained"], row["cancelled_at_stop"]) == (len(ok), len(ok), len(cut))
    # per phase in the outcome rows too (regress --history's error rate reads them)
    assert [(o["outcome"], o["at_stop"]) for o in run["outcomes"] if o["outcome"] != "ok"] == [("cancelled", len(cut))]
    assert row["attainment"] == 1.0
    assert row["pass"]
    header, line = next(
        (a, b)
        for a, b in zip(proc.stderr.splitlines(), proc.stderr.splitlines()[1:], strict=False)
        if b.startswith("en ")
    )
    assert header.split()[:4] == ["lang", "reqs", "stop", "ok%"]
    assert line.split()[:4] == ["en", str(len(ok)), str(len(cut)), "100.0"]


@pytest.mark.parametrize("attempt", range(2))
def test_a_single_process_writes_every_request_it_counted(tmp_path, attempt):
    """requests.jsonl holds a line for every request run.json counts, the last second's too."""
    with scripted.running(5, "--itl-ms", "5", "10") as url:
        proc = locust(
            "--host", url, "--results-dir", str(tmp_path), "-u", "8", "-r", "8", "-t", "3s", "--langs", "en,de",
            "--max-tokens", "12",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    counted = sum(o["count"] for o in run["outcomes"])
    assert counted > 100
    assert len(requests) == run["requests"]["written"] == counted


TOKEN = "admin-secret"


@pytest.mark.timing
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_the_run_with_its_results_written_and_its_fault_reverted(tmp_path, monkeypatch, sig):
    """SIGTERM mid-run, a GPU clock lock on: the run ends as on Ctrl-C (it died with 143, nothing
    written, the clock left locked): run.json with the requests so far, the lock undone."""
    schedule, journal = tmp_path / "schedule.yaml", tmp_path / "journal.json"
    with serve("--sim-time-scale", "0.3", "--admin-token", TOKEN) as server:
        schedule.write_text(f"""faults:
  - name: gpu-at-660mhz
    kind: gpu_clock
    target: {{sim: "{server.url}"}}
    at: 1s
    duration: 60s
    params: {{graphics_mhz: 660}}
""")
        monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
        args = ["--host", server.url, "--results-dir", str(tmp_path / "results"), "-u", "4", "-r", "4", "-t", "60s"]
        args += ["--langs", "en", "--max-tokens", "16", "--schedule", str(schedule), "--fault-journal", str(journal)]
        proc = subprocess.Popen(
            [*LOCUST, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        clocks = httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=5)
        try:
            deadline = time.monotonic() + 30
            while not clocks.get("/admin/device/clocks").json()["locked"]:
                assert time.monotonic() < deadline, "the fault never started"
                time.sleep(0.1)
            time.sleep(1.0)  # requests in the window
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=120)  # a stop reverts its faults first: on a busy machine, seconds
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err[-3000:]
        assert clocks.get("/admin/device/clocks").json()["locked"] is False  # reverted
        assert json.loads(journal.read_text()) == []
    run, _, requests = only_run(tmp_path / "results")
    assert {r["phase"] for r in requests} >= {"baseline", "gpu-at-660mhz"}
    assert len(requests) == sum(o["count"] for o in run["outcomes"])
    (window,) = run["faults"]
    assert window["actual_end"] is not None
