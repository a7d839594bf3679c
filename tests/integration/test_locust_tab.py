"""The llmchaos tabs in Locust's web UI during a real run: a master with its web UI (not headless) and
a worker drive the reference server; once the load stops, headless Chromium (Debian's) renders the
languages tab (a screenshot kept in the test's directory) with a row per language, whose values are
the tab's JSON, which equals what the master's merged histograms give (read back from the results
it writes when it quits); the faults tab lists the schedule's window ahead."""

from __future__ import annotations

import contextlib
import html
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from loadtests.webui import FAULTS, LANGS, ROUTE
from tests.integration.loadtest_helpers import LOCUST, only_run
from tests.procs import ROOT, free_port, serve, stop

TOKEN = "admin-secret"
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)


def chromium(url: str, out: Path, *mode: str) -> str:
    """Headless Chromium on `url` with the given mode (--dump-dom, --screenshot=FILE); its stdout."""
    binary = shutil.which("chromium")
    assert binary, "chromium not found: run `make debian-deps` (as root) to install it"
    profile = out / f"chromium-profile-{time.monotonic_ns()}"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    flags += ["--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]
    flags += ["--virtual-time-budget=8000", "--window-size=1400,700"]  # the UI fetches its stats in that time
    r = subprocess.run([binary, *flags, *mode, url], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    shutil.rmtree(profile, ignore_errors=True)
    return r.stdout


def rows(dom: str) -> list[list[str]]:
    """The body rows of the page's table, as cell texts."""
    return [[html.unescape(c).strip() for c in CELL.findall(row)] for row in ROW.findall(dom) if "<td" in row]


@contextlib.contextmanager
def master_and_worker(host: str, schedule: Path, results: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A Locust master with its web UI that starts the test itself (7 s), and one worker; both
    stopped by PID at the end. Yields the UI's URL and the master."""
    web, bus = free_port(), free_port()
    master = subprocess.Popen(
        [
            *LOCUST[:5],
            *("--master", "--master-bind-port", str(bus), "--web-host", "127.0.0.1", "--web-port", str(web)),
            *("--autostart", "--expect-workers", "1", "-u", "8", "-r", "8", "-t", "7s", "--langs", "en,de"),
            *("--max-tokens", "8", "--host", host, "--results-dir", str(results), "--schedule", str(schedule)),
            *("--fault-journal", str(results.parent / "journal.json")),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LLMCHAOS_ADMIN_TOKEN": TOKEN},
    )
    worker = subprocess.Popen(
        [*LOCUST[:5], "--worker", "--master-port", str(bus)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{web}", master
    finally:
        stop(master)
        stop(worker)


def watch(ui: str, master: subprocess.Popen, timeout: float = 60.0) -> tuple[list[dict], dict]:
    """The tab's JSON every 0.2 s while the test runs, then the UI's stats once it has stopped and the
    master's totals are final."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout
    while True:
        assert master.poll() is None, master.stderr.read() if master.stderr else ""
        with contextlib.suppress(httpx.TransportError):
            stats = httpx.get(ui + "/stats/requests", timeout=10).json()
            tab = httpx.get(ui + ROUTE, timeout=10).json()
            if stats["state"] == "running":
                seen.append(tab)
            elif tab["settled"]:  # stopped, every worker's last data merged
                return seen, httpx.get(ui + "/stats/requests", timeout=10).json()
        assert time.monotonic() < deadline, "the test did not stop"
        time.sleep(0.2)


def test_the_languages_tab_shows_the_masters_merged_histograms(tmp_path):
    schedule = tmp_path / "schedule.yaml"
    with serve("--admin-token", TOKEN) as server:
        schedule.write_text(
            f'seed: 1\nfaults:\n  - name: gpu-at-660mhz\n    kind: gpu_clock\n    target: {{sim: "{server.url}"}}\n'
            "    at: 4s\n    duration: 1.5s\n    params: {graphics_mhz: 660}\n"
        )
        with master_and_worker(server.url, schedule, tmp_path / "results") as (ui, master):
            during, stats = watch(ui, master)
            tab = httpx.get(ui + ROUTE, timeout=10).json()
            assert {e["key"]: e["data"] for e in stats["extended_stats"]} == {
                LANGS: tab["languages"],
                FAULTS: tab["faults"],
            }
            shot = tmp_path / "llmchaos-languages-tab.png"
            chromium(f"{ui}/?tab={LANGS}", tmp_path, f"--screenshot={shot}")
            shown = rows(chromium(f"{ui}/?tab={LANGS}", tmp_path, "--dump-dom"))
            master.send_signal(signal.SIGTERM)  # quits: the results are written from the same totals
            _, err = master.communicate(timeout=60)
    assert shot.stat().st_size > 10_000  # a rendered page, kept in the test's directory
    print("screenshot:", shot)
    assert [r["lang"] for r in tab["languages"]] == ["de", "en"]
    by_lang = {row[1]: row for row in shown}
    assert set(by_lang) == {"de", "en"}, shown
    columns = ["target", "lang", "issued", "outcomes", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"]
    for r in tab["languages"]:
        cells = dict(zip(columns, by_lang[r["lang"]], strict=False))
        assert cells["target"] == r["target"] == server.url
        assert cells["outcomes"] == r["outcomes"]
        for k in ("issued", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"):
            assert float(cells[k]) == r[k], (r["lang"], k, cells[k], r[k])
    # The master's merged histograms, as it wrote them on quitting, give the same percentiles.
    assert master.returncode == 0, err[-3000:]
    run, hist, _ = only_run(tmp_path / "results")
    assert tab["run_id"] == run["run_id"]
    for r in tab["languages"]:
        issued = {s["lang"]: s["issued"] for s in run["slo"]}
        assert r["issued"] == issued[r["lang"]] > 0
        for metric in ("ttft", "itl"):
            h = hist.combined(metric, target=server.url, lang=r["lang"])
            assert h is not None
            for pct in (50, 99):
                assert r[f"{metric}_p{pct}_ms"] == round(h.quantile(pct) * 1000.0, 1)
    # While the test ran, the faults tab had the window ahead, then active, with the phase it named.
    states = [(t["phase"], [(f["name"], f["state"]) for f in t["faults"]]) for t in during]
    ahead = ("baseline", [("gpu-at-660mhz", "ahead")])
    active = ("gpu-at-660mhz", [("gpu-at-660mhz", "active")])
    assert ahead in states, states
    assert active in states, states
    assert states.index(ahead) < states.index(active)
    assert tab["faults"] == []  # the test is over: nothing ahead within its run time
