"""A Locust run against the reference server through the SSE proxy, with a schedule of two windows:
run.json shows the windows and per-phase percentiles, the fault phases are worse than baseline, and
each language's detection and recovery of the first-token delay lie within one evaluation window of
the window's known start and revert. A drill with a corrupt window: canaries wrong only within it."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.conftest import math_bound
from tests.integration.loadtest_helpers import distributed, locust, only_run, summary
from tests.integration.test_sse_proxy import FAULT, proxy
from tests.noise import WakeNoise
from tests.procs import serve

TOKEN = "admin-secret"


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["one process", "master and two workers"])
def test_fault_windows_in_the_results(tmp_path, monkeypatch, mode):
    profile = math_bound(tmp_path)  # steps all math: the lock slows ITL 3x (the default's decode hardly)
    with (
        serve("--profile", profile, "--sim-time-scale", "0.3", "--admin-token", TOKEN) as server,
        proxy(server.url) as p,
    ):
        schedule = tmp_path / "schedule.yaml"
        schedule.write_text(f"""seed: 1
faults:
  - name: first-token-delay
    kind: sse
    target: {{proxy: "{p.split("//")[1]}"}}
    at: 3s
    duration: 3s
    params: {{first_event_delay: 0.3}}
  - name: gpu-at-660mhz
    kind: gpu_clock
    target: {{sim: "{server.url}"}}
    at: 8s
    duration: 4s
    params: {{graphics_mhz: 660}}
""")
        slos = tmp_path / "slo.yaml"  # the delay holds every first event 0.3 s: each window's median over
        slos.write_text("en: {ttft_p50_ms: 250}\nde: {ttft_p50_ms: 250}\nrecovery: {window: 1s, windows: 2}\n")
        monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)  # inherited by Locust and its workers
        args = (
            "--host",
            p,
            "--results-dir",
            str(tmp_path / "results"),
            "-u",
            "8",
            "-r",
            "8",
            "-t",
            "13s",
            "--langs",
            "en,de",
            "--max-tokens",
            "8",
            "--schedule",
            str(schedule),
            "--fault-journal",
            str(tmp_path / "journal.json"),
            "--slo",
            str(slos),
        )
        with WakeNoise() as noise:
            proc = locust(*args) if mode == "one process" else distributed(*args)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert httpx.get(p + FAULT).json()["active"] is False  # reverted at the end
        assert json.loads((tmp_path / "journal.json").read_text()) == []
    run, _, requests = only_run(tmp_path / "results")
    windows = {w["name"]: w for w in run["faults"]}
    assert set(windows) == {"first-token-delay", "gpu-at-660mhz"}
    for w in windows.values():
        # 50 ms on a quiet machine; plus two of the worst delays a busy one imposed (the runner's
        # timer, the apply's round trip)
        assert abs(w["actual_start"] - w["planned_start"]) < 0.05 + 2 * noise.worst, (w, noise.worst)
        assert w["actual_end"] is not None
    for lang in ("en", "de"):
        base = summary(run, lang, "ttft", "baseline")
        delayed = summary(run, lang, "ttft", "first-token-delay")
        slow = summary(run, lang, "itl", "gpu-at-660mhz")
        assert delayed["p50"] > base["p50"] + 0.25  # the proxy held the first event 0.3 s
        # 1980/660 = 3x step time. A request is in the phase it started in: one that began in the
        # window's last 0.8 s (8 tokens at 3x) ran partly at full clock; nine in ten ran all locked.
        # Over 2.2x: a whole make test's busy machine made it 2.44x once (an unlocked clock: 1x).
        assert slow["p50"] > 2.2 * summary(run, lang, "itl", "baseline")["p50"]
    phases = {r["phase"] for r in requests}
    assert {"baseline", "first-token-delay", "gpu-at-660mhz"} <= phases
    delay = windows["first-token-delay"]
    rows = [r for r in run["recovery"] if (r["window"], r["metric"]) == ("first-token-delay", "ttft_p50_ms")]
    assert sorted(r["lang"] for r in rows) == ["de", "en"]
    for r in rows:
        # windows of 1 s from the second the delay began: the first wholly in it is over, and the
        # first wholly after its revert is back (its start at most 1 s after the revert)
        assert 0 < r["detect_s"] <= 2.0, (r, delay)
        assert r["recovered"], (r, delay)
        assert 0 <= r["recover_s"] <= 1.0, (r, delay)
    assert "recovery (windows of 1 s; back = 2 in a row within the SLO):" in proc.stderr


@pytest.mark.timing
@pytest.mark.parametrize(
    ("mode", "corrupt"),
    [
        ("one process", 'kind: sse\n    target: {{proxy: "{proxy}"}}\n    params: {{corrupt_ratio: 1}}'),
        ("master and two workers", 'kind: corrupt\n    target: {{sim: "{server}"}}'),
    ],
    ids=["proxy corrupt_ratio, one process", "server corrupt, master and two workers"],
)
def test_canaries_are_wrong_only_in_the_corrupt_window(tmp_path, monkeypatch, mode, corrupt):
    """The drill of issue 32: a first-token delay, then answers corrupted (by the proxy, or by the
    server's admin fault). Canaries that started within the corrupt window are `wrong`, and none
    that started clear of it; each language's detection and recovery of both windows lie within one
    evaluation window of their known edges."""
    with serve("--sim-time-scale", "0.3", "--admin-token", TOKEN) as server, proxy(server.url) as p:
        schedule = tmp_path / "schedule.yaml"
        window = corrupt.format(proxy=p.split("//")[1], server=server.url)
        schedule.write_text(f"""seed: 1
faults:
  - name: first-token-delay
    kind: sse
    target: {{proxy: "{p.split("//")[1]}"}}
    at: 2s
    duration: 3s
    params: {{first_event_delay: 0.3}}
  - name: corrupt-answers
    {window}
    at: 7s
    duration: 3s
""")
        slos = tmp_path / "slo.yaml"  # a wrong answer is a failure: over every threshold
        slos.write_text("en: {ttft_p50_ms: 250}\nde: {ttft_p50_ms: 250}\nrecovery: {window: 1s, windows: 2}\n")
        monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
        args = (
            *("--host", p, "--results-dir", str(tmp_path / "results"), "-u", "8", "-r", "8", "-t", "14s"),
            *("--langs", "en,de", "--max-tokens", "8", "--canary-rate", "0.8", "--slo", str(slos)),
            *("--schedule", str(schedule), "--fault-journal", str(tmp_path / "journal.json")),
            *("--exit-code-on-error", "0"),  # Locust's exit 1 for failed requests: the wrong ones are meant
        )
        with WakeNoise() as noise:
            proc = locust(*args) if mode == "one process" else distributed(*args)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert httpx.get(server.url + "/admin/faults/corrupt", headers={"authorization": f"Bearer {TOKEN}"}).json() == {
            "corrupt": False
        }
    run, _, requests = only_run(tmp_path / "results")
    w = next(w for w in run["faults"] if w["name"] == "corrupt-answers")
    edge = 0.05 + 2 * noise.worst  # a request this close to an edge reached the fault either side of it
    canaries = [r for r in requests if r["canary"] is not None]
    inside = [r for r in canaries if w["actual_start"] + edge < r["intended"] < w["actual_end"] - edge]
    clear = [  # the end of the test cuts a few short: those are neither
        r
        for r in canaries
        if not w["actual_start"] - edge < r["intended"] < w["actual_end"] + edge and not r["at_stop"]
    ]
    assert {r["lang"] for r in inside} == {"en", "de"}
    assert all(r["outcome"] == "wrong" for r in inside), [(r["intended"], r["outcome"]) for r in inside]
    assert all(r["outcome"] == "ok" for r in clear), [r for r in clear if r["outcome"] != "ok"][:3]
    assert all(r["canary"] is not None for r in requests if r["outcome"] == "wrong")  # only canaries are judged
    assert {r["phase"] for r in requests if r["outcome"] == "wrong"} <= {"corrupt-answers", "baseline"}
    rows = {(c["lang"], c["phase"]): c for c in run["canaries"]}
    for lang in ("en", "de"):
        assert rows[(lang, "corrupt-answers")]["wrong"] > 0.8 * rows[(lang, "corrupt-answers")]["sent"]
        assert rows[(lang, "first-token-delay")]["wrong"] == 0  # slow, not wrong
    for name in ("first-token-delay", "corrupt-answers"):
        judged = [r for r in run["recovery"] if (r["window"], r["metric"]) == (name, "ttft_p50_ms")]
        assert sorted(r["lang"] for r in judged) == ["de", "en"]
        for r in judged:  # as in the test above: within one window of 1 s of the known edges
            assert 0 < r["detect_s"] <= 2.0, r
            assert r["recovered"], r
            assert 0 <= r["recover_s"] <= 1.0, r
    assert "answered wrong (200, whole, failed its check): " in proc.stderr
