"""Every API adapter against the reference server, load shapes, distributed open loop, --check-slo,
shared prompt prefixes per user on any worker."""

from __future__ import annotations

import re
from collections import Counter

import httpx
import pytest

from tests.integration.loadtest_helpers import distributed, locust, only_run, summary
from tests.procs import serve
from tests.servers import scripted


@pytest.fixture(scope="module")
def reference():
    with serve("--sim-time-scale", "0.3") as s:
        yield s


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions", "gemini"])
@pytest.mark.parametrize("stream", [True, False])
def test_every_api_streaming_or_not_against_the_reference_server(tmp_path, reference, api, stream):
    proc = locust(
        "--host",
        reference.url,
        "--api",
        api,
        "--results-dir",
        str(tmp_path),
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "4s",
        "--langs",
        "en,zh",
        "--max-tokens",
        "12",
        *([] if stream else ["--no-stream"]),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    done = [r for r in requests if r["outcome"] != "cancelled"]
    assert done, {r["outcome"] for r in done}
    assert all(r["outcome"] == "ok" for r in done), {r["outcome"] for r in done}
    assert all(r["usage_tokens"] is not None and r["usage_tokens"] <= 12 for r in done)
    assert not any(r["tokens_disagree"] for r in done)  # same tokenizer on both sides
    for lang in ("en", "zh"):
        assert summary(run, lang, "ttft")["count"] > 0
        if stream:
            assert summary(run, lang, "itl")["count"] > 0
    assert run["api"] == api


def test_step_shape_drives_users_and_ends_the_test(tmp_path, reference):
    proc = locust(
        "--host",
        reference.url,
        "--results-dir",
        str(tmp_path),
        "--shape",
        "step",
        "--levels",
        "2,6",
        "--stage-duration",
        "3s",
        "-r",
        "10",
        "--langs",
        "en",
        "--max-tokens",
        "8",
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    assert [s["users"] for s in run["load_profile"]["stages"]] == [2, 6]
    assert 5.0 <= run["duration_s"] <= 9.0  # the shape, not -t, ended it
    start = min(r["sent"] for r in requests)

    def in_flight(t: float) -> int:
        return sum(1 for r in requests if r["e2e"] and r["sent"] <= start + t < r["sent"] + r["e2e"])

    assert max(in_flight(t / 10) for t in range(5, 25)) == 2  # stage 1: 2 users
    assert max(in_flight(t / 10) for t in range(40, 55)) == 6  # stage 2: 6 users


def prefix_hits(url: str) -> float:
    return float(re.search(r"vllm:prefix_cache_hits_total{[^}]*} (\S+)", httpx.get(url + "/metrics").text)[1])


@pytest.mark.parametrize("mode", ["one process", "two workers"])
def test_each_user_opens_every_prompt_with_its_own_prefix_on_any_worker(tmp_path, reference, mode):
    before = prefix_hits(reference.url)
    args = ("--host", reference.url, "--results-dir", str(tmp_path), "-u", "4", "-r", "4", "-t", "3s")
    args += ("--langs", "en", "--api", "gemini", "--max-tokens", "8", "--prefix-tokens", "300")
    proc = locust(*args) if mode == "one process" else distributed(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, _, requests = only_run(tmp_path)
    ok = [r for r in requests if r["outcome"] == "ok"]
    per_prefix = Counter(r["prefix"] for r in ok)
    assert set(per_prefix) == {0, 1, 2, 3}  # one each: the workers' users numbered apart
    assert min(per_prefix.values()) > 1
    # from each user's second request on, the server found its prefix in its cache
    assert prefix_hits(reference.url) - before >= (len(ok) - 4) * 0.9 * 300


@pytest.mark.timing
def test_open_loop_rate_is_the_masters_across_two_workers(tmp_path):
    with scripted.running(1, "--itl-ms", "2", "4") as url:
        proc = distributed(
            "--host",
            url,
            "--results-dir",
            str(tmp_path),
            "-u",
            "40",
            "-r",
            "40",
            "-t",
            "8s",
            "--rate",
            "30",
            "--arrival",
            "constant",
            "--max-tokens",
            "4",
            "--langs",
            "en,de",
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    issued = sorted(r["intended"] for r in requests)
    span = issued[-1] - issued[0]
    assert abs(len(issued) / span - 30) < 3  # one global schedule, shared: not 30 per worker
    # Constant arrivals on one grid of 1/30 s, each slot taken once (two workers each running the
    # rate would land on the same instants). A worker that stops a moment before the other leaves
    # its last slots empty, so slots may be missing near the end, not all through the run.
    slots = [(t - issued[0]) * 30 for t in issued]
    assert all(abs(k - round(k)) < 1e-3 for k in slots), slots
    taken = {round(k) for k in slots}
    assert len(taken) == len(slots)
    assert len(taken) >= 0.9 * (max(taken) + 1), sorted(set(range(max(taken) + 1)) - taken)
    assert run["load_profile"]["mode"] == "open"


def test_check_slo_fails_the_run_when_an_slo_is_missed(tmp_path, reference):
    slo = tmp_path / "slo.yaml"
    slo.write_text("en:\n  ttft_p99_ms: 0.001\n")
    args = ("--host", reference.url, "-u", "2", "-r", "2", "-t", "3s", "--langs", "en", "--max-tokens", "4")
    assert locust(*args, "--slo", str(slo)).returncode == 0  # reported, not enforced
    failed = locust(*args, "--slo", str(slo), "--check-slo")
    assert failed.returncode == 1
    assert "FAIL" in failed.stderr
    bad = locust(*args, "--slo", str(tmp_path / "missing.yaml"))
    assert bad.returncode == 2
    assert "missing.yaml" in bad.stderr.strip().splitlines()[-1]
