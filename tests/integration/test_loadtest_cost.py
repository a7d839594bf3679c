"""J/token and $/Mtok against a server whose GPU counter rises by a known amount per token streamed
(and by nothing else), read from its /metrics page or through a real Prometheus by a real Locust run;
an energy source with no counter is absent, and the run completes; the seeds' clock-lock drill
against the sim moves J/token by its power model's ratio."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest

from reference_server import profile
from tests.integration.conftest import TORCH
from tests.integration.loadtest_helpers import distributed, locust, only_run
from tests.procs import serve
from tests.servers import scripted
from tests.services import prometheus

J_PER_TOKEN = 0.25
PRICE = 2.0  # USD per GPU-hour


def args(url: str, results: str, *more: str) -> tuple[str, ...]:
    return (
        "--host", url, "--results-dir", results, "-u", "6", "-r", "6", "-t", "6s", "--langs", "en,de",
        "--max-tokens", "24", "--warmup", "2s", *more,
    )  # fmt: skip


@contextlib.contextmanager
def energy_source(url: str, via: str) -> Iterator[tuple[str, ...]]:
    """The scripted server's counter as `--energy-from` reads it: its page, or a Prometheus scraping it."""
    if via == "page":
        yield ("--energy-from", url + "/metrics", "--energy-interval", "0.5")
        return
    with prometheus([url.split("//")[1]], scrape_interval="500ms") as prom:
        prom.wait_for('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID="GPU-scripted"}', bool)
        yield ("--energy-from", prom.url, "--energy-selector", '{UUID="GPU-scripted", job="llmchaos"}')


@pytest.mark.timing  # a reading's time against the tokens': the timing lane, ahead of the rest
@pytest.mark.parametrize(
    ("via", "mode"), [("page", "one process"), ("page", "master and two workers"), ("prometheus", "one process")]
)
def test_joules_per_token_is_the_servers_own(tmp_path, via, mode):
    with (
        # the usage in every event: a stream the stop cuts short counts what it was sent, as the server does
        scripted.running(3, "--joules-per-token", str(J_PER_TOKEN), "--continuous-usage") as url,
        energy_source(url, via) as energy,
    ):
        run_args = args(url, str(tmp_path / "results"), *energy, "--price-per-gpu-hour", str(PRICE))
        proc = locust(*run_args) if mode == "one process" else distributed(*run_args)
        page = httpx.get(url + "/metrics", timeout=30).text  # the counter: every token the server wrote
        spent_j = float(page.split()[-1]) / 1000
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, _ = only_run(tmp_path / "results")
    e = run["energy"]
    assert e["source"] == "measured"
    assert e["method"] == "counter"
    assert len(e["gpus"]) == 1
    assert 0.5 <= e["interval_s"] < 1.0  # 0.5 s and a read's round trip (longer on a busy machine)
    assert e["why"] is None
    rows = {(c["lang"], c["phase"]): c for c in run["cost"]}
    assert {("en", "warmup"), ("en", "baseline"), ("de", "warmup"), ("de", "baseline")} <= set(rows)
    # The server spent energy on the tokens it wrote and the client never read (still in the socket
    # when the test stopped its users): at most that much lands on the last interval's tokens. Beyond
    # it, a reading's time and a token's arrival can fall on either side of each other by a read's
    # round trip: a few tokens of each interval; at most 2 % measured under two busy loops, 3.5 % once.
    unread_j = spent_j - J_PER_TOKEN * sum(c["tokens"] for c in rows.values())
    assert unread_j >= -1e-6
    for (lang, phase), c in rows.items():
        assert c["source"] == "measured"
        truth = J_PER_TOKEN * c["tokens"]
        assert abs(c["energy_j"] - truth) <= unread_j + 0.05 * truth, (lang, phase, c, unread_j)
        assert c["usd_per_mtok"] == pytest.approx(c["gpu_s"] / 3600 * PRICE / c["tokens"] * 1e6)
    # every joule of the covered span is someone's or idle's, and the blocks add up to the rows
    attributed = sum(c["energy_j"] for c in rows.values())
    assert attributed + e["unattributed_j"] == pytest.approx(e["energy_j"], rel=1e-6)
    assert sum(b["energy_j"] for b in e["blocks"]) == pytest.approx(attributed, rel=1e-6)
    assert "J/token" in proc.stderr
    assert "cost (measured" in proc.stderr


def test_a_server_on_no_gpu_has_its_cost_absent_and_says_why(tmp_path):
    """The torch executor on this machine's CPU: its page has no GPU series and says why; the run's
    cost is absent with that reason (never a zero), every row still counting its tokens."""
    with serve(*TORCH) as server:
        proc = locust(
            "--host", server.url, "--results-dir", str(tmp_path / "results"), "-u", "2", "-r", "2", "-t", "4s",
            "--langs", "en,de", "--max-tokens", "8", "--energy-from", server.url + "/metrics",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, _ = only_run(tmp_path / "results")
    assert run["energy"]["source"] == "absent"
    assert run["energy"]["why"].endswith("(it says: the TorchExecutor runs on no GPU)")
    assert {c["source"] for c in run["cost"]} == {"absent"}
    assert all(c["j_per_token"] is None and c["usd_per_mtok"] is None and c["tokens"] > 0 for c in run["cost"])
    assert f"cost: absent ({run['energy']['why']})" in proc.stderr


@pytest.mark.timing  # J/token against the sim's steps: the timing lane, ahead of the rest
def test_a_clock_lock_changes_joules_per_token_as_the_sims_power_model_says(tmp_path, monkeypatch):
    """The seeds' GPU drill against the sim: 8 users decode in one batch; locked at half the clock, a
    decode step of 8 is as long (memory-bound: its math is under the weights' read) at the model's
    lower watts, so each language's J/token falls by the model's ratio of the two steps' power. Within
    15 %: a new request's prefill joins a step now and then, a request is in the phase it started in
    (one that began just before the lock ran partly locked), and a busy machine's lost time is idle
    (measured here: within 9 % under two busy loops, 3 of 4 runs within 3 %)."""
    p = profile.load(profile.DEFAULT)
    lock_mhz = p.max_clock_mhz / 2
    step = p.step
    assert step.decode_token * 8 * 2 < step.memory  # memory-bound at half the clock: the same step time
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", "T")
    with serve("--sim-time-scale", "1", "--sim-jitter", "0", "--admin-token", "T") as server:
        schedule = tmp_path / "schedule.yaml"
        schedule.write_text(f"""faults:
  - name: gpu-lock
    kind: gpu_clock
    target: {{sim: "{server.url}"}}
    at: 5s
    duration: 6s
    params: {{graphics_mhz: {lock_mhz:g}}}
""")
        proc = locust(
            "--host", server.url, "--results-dir", str(tmp_path / "results"), "-u", "8", "-r", "8", "-t", "15s",
            "--langs", "en,de", "--max-tokens", "32", "--prompt-sizes", "short", "--warmup", "2s",
            "--schedule", str(schedule), "--fault-journal", str(tmp_path / "journal.json"),
            "--energy-from", server.url + "/metrics", "--energy-interval", "0.5", "--price-per-gpu-hour", "3",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, _ = only_run(tmp_path / "results")
    assert run["energy"]["source"] == "modelled"
    rows = {(c["lang"], c["phase"]): c for c in run["cost"]}
    predicted = p.power.step_w(8, 0.5) / p.power.step_w(8, 1.0)
    for lang in ("en", "de"):
        base, locked = rows[lang, "baseline"], rows[lang, "gpu-lock"]
        assert locked["source"] == base["source"] == "modelled"
        ratio = locked["j_per_token"] / base["j_per_token"]
        assert ratio == pytest.approx(predicted, rel=0.15), (lang, ratio, predicted, base, locked)
        for c in (base, locked):  # money: the GPU-seconds its tokens took, at the price
            assert c["usd_per_mtok"] == pytest.approx(c["gpu_s"] / 3600 * 3 / c["tokens"] * 1e6)
