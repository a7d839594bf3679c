"""Issue 33's drills, each a real Locust run with a schedule against a real cluster of the reference
server: a replica killed behind the router (its share of the in-flight requests cut, the rest failed
over, every request ok after), the replica holding a user's prompt prefix killed behind the prefix
router (that user's next turn prefilled cold on the other replica: its TTFT up by the prefix's
prefill, warm again after), and a partitioned KV link between a prefill and a decode engine, per
decode's failure behaviour (fail-fast: an error well under a second; recompute: ok, its TTFT up by the
wait and the prefill; hang: stranded until --kv-timeout), each classified so in run.json."""

from __future__ import annotations

import itertools
import json
import re
import statistics

import httpx
import pytest

from loadtests.prompts import shared_prefix
from reference_server import profile
from tests.integration.loadtest_helpers import locust, only_run
from tests.procs import serve

TOKEN = "drill-secret"
KV_TIMEOUT_S = 2.0
STALL_S = 1.0


def drill(tmp_path, monkeypatch, url: str, window: str, seconds: int, *more: str) -> tuple[dict, list[dict]]:
    """Locust for `seconds` against `url` with one fault window (YAML lines after `- name:`)."""
    schedule = tmp_path / "schedule.yaml"
    schedule.write_text(f"seed: 1\nfaults:\n  - name: {window}\n")
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
    results = tmp_path / "results"
    args = ("--host", url, "--results-dir", str(results), "-t", f"{seconds}s", "--langs", "en,de")
    args += ("--schedule", str(schedule), "--fault-journal", str(tmp_path / "journal.json"), *more)
    proc = locust(*args)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: requests failed, as the drill means
    run, _, requests = only_run(results)
    assert [w["error"] for w in run["faults"]] == [None]
    return run, requests


def ending(run: dict, phase: str) -> list[dict]:
    return [e for e in run.get("endings", []) if e["phase"] == phase]


def test_a_replica_kill_cuts_its_share_and_the_router_fails_over(tmp_path, monkeypatch):
    # streams of 0.8 s (32 tokens paced at 40 a second), so that several are in flight at the kill
    with serve("--replicas", "2", "--router", "round-robin", "--admin-token", TOKEN, "--pacer-rate", "40") as server:
        window = f"""replica-kill
    kind: replica
    target: {{sim: "{server.url}", replica: 1}}
    at: 2s
    duration: 3s
    params: {{action: kill}}"""
        # 14 s: the revert waits for the engine started again (seconds on a busy machine), then ok again
        run, requests = drill(tmp_path, monkeypatch, server.url, window, 14, "-u", "8", "-r", "8", "--max-tokens", "32")
    (w,) = run["faults"]
    kill, back = w["actual_start"], w["actual_end"]
    in_flight = [r for r in requests if r["sent"] < kill and (r["e2e"] is None or r["intended"] + r["e2e"] > kill)]
    on_killed = [r for r in in_flight if r["replica"] == "1"]
    requests = [r for r in requests if r["outcome"] != "cancelled"]  # by the test's end
    failed = [r for r in requests if r["outcome"] != "ok"]
    assert on_killed, in_flight
    assert 0.2 < len(on_killed) / len(in_flight) < 0.8, (len(on_killed), len(in_flight))  # round robin: half
    # exactly the killed replica's streams in flight were cut, no other request failed
    assert sorted(r["request_id"] for r in failed) == sorted(r["request_id"] for r in on_killed)
    assert {r["outcome"] for r in failed} <= {"truncated", "stalled"}, {r["outcome"] for r in failed}
    during = [r for r in requests if r["phase"] == "replica-kill"]
    assert during
    assert {r["replica"] for r in during} == {"0"}
    # the requests the router sent to the dead one (the first, and any sent with it) before its health
    # checks said so went on to the other; the window starts when the kill's admin call has answered,
    # so one sent between the kill and that answer (a busy machine's round trip) is still baseline
    over = [r for r in requests if r["failed_over"] >= 1]
    assert over
    just_before = [r for r in over if r["phase"] == "baseline" and -0.5 < r["sent"] - kill < 0]
    seen = [(r["failed_over"], r["replica"], r["phase"], round(r["sent"] - kill, 3)) for r in over]
    assert all(s[:2] == (1, "0") for s in seen), seen
    assert all(r["phase"] == "replica-kill" for r in over if r not in just_before), seen
    after = [r for r in requests if r["sent"] > back]
    assert after
    assert all(r["outcome"] == "ok" for r in after)
    assert sum(row["failed_over"] for row in ending(run, "replica-kill")) == len(over) - len(just_before)


PREFIX_TOKENS = 2000


def overlapping(r: dict, others: list[dict]) -> int:
    """How many of `others` (r among them) waited for their first token while `r` did."""
    return sum(o["intended"] < r["intended"] + r["ttft"] and r["intended"] < o["intended"] + o["ttft"] for o in others)


@pytest.mark.timing
def test_a_killed_prefix_holder_shows_its_users_the_cold_cache_as_a_ttft_step(tmp_path, monkeypatch):
    # every user's prompts open with its own prefix of 2000 tokens; the window kills the replica
    # holding en user 0's (seed 0, Locust's default). Think times apart the users' turns, so that
    # the cold prefills after the kill seldom share the surviving engine's steps
    held = shared_prefix("en", PREFIX_TOKENS, 0, 0)
    with serve("--replicas", "2", "--router", "prefix", "--admin-token", TOKEN) as server:
        window = f"""prefix-kill
    kind: replica
    target: {{sim: "{server.url}", holding: {json.dumps(held)}}}
    at: 3s
    duration: 4s
    params: {{action: kill}}"""
        more = ("-u", "4", "-r", "4", "--max-tokens", "4", "--prompt-sizes", "short", "--think-time", "0.5")
        run, requests = drill(
            tmp_path, monkeypatch, server.url, window, 11, *more, "--prefix-tokens", str(PREFIX_TOKENS)
        )
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
    kill = run["faults"][0]["actual_start"]
    users: dict[tuple[str, int], list[dict]] = {}
    for r in sorted(requests, key=lambda r: r["intended"]):
        if r["outcome"] == "ok":
            users.setdefault((r["lang"], r["prefix"]), []).append(r)
    assert len(users) == 4
    warm = {u: [r for r in rs[1:] if r["intended"] + r["end_s"] < kill] for u, rs in users.items()}  # rs[0]: cold
    after = {u: [r for r in rs if r["intended"] + r["end_s"] > kill] for u, rs in users.items()}
    (killed,) = {r["replica"] for r in warm["en", 0]}
    (survivor,) = {"0", "1"} - {killed}
    moved = [u for u, rs in warm.items() if {r["replica"] for r in rs} == {killed}]
    cold = [after[u][0] for u in moved]  # each moved user's first turn after the kill
    prefill = profile.load(profile.DEFAULT).step.prefill_token * PREFIX_TOKENS  # what its cache had saved
    print(f"prefill of {PREFIX_TOKENS} tokens: {prefill * 1000:.1f} ms")
    for u in users:
        base = statistics.median(r["ttft"] for r in warm[u])
        assert {r["replica"] for r in after[u]} == {survivor}
        later = statistics.median(r["ttft"] for r in after[u][u in moved :]) - base
        assert abs(later) < prefill / 3, (u, later)  # no step for a survivor's; warm again on the survivor
        if u in moved:
            first = after[u][0]
            up, k = first["ttft"] - base, overlapping(first, cold)
            print(f"{u}: first turn after the kill up {up * 1000:.1f} ms ({k} cold prefill(s) at once)")
            # its own prefill at least; at most those of every moved user's prefill it waited with
            # (an engine step computes them together) and what it waited on the dead replica
            assert 0.6 * prefill < up < 1.4 * k * prefill + 0.03, (u, up, k)
    assert moved
    assert ("en", 0) in moved
    # corroborated by the survivor: each of its warm turns found its prefix in the cache
    hits = float(re.search(rf'vllm:prefix_cache_hits_total{{[^}}]*replica="{survivor}"[^}}]*}} (\S+)', metrics)[1])
    served = sum(r["replica"] == survivor for rs in users.values() for r in rs)
    print(f"survivor's prefix cache hits per turn {hits / served:.0f}")
    assert 0.8 * PREFIX_TOKENS < hits / served < PREFIX_TOKENS


def cached(r: dict) -> int:
    """A request's prompt tokens found cached (the server, as vLLM, leaves out a count of 0)."""
    return r["cached_tokens"] or 0


@pytest.mark.timing
def test_a_killed_replica_takes_its_conversations_prefixes_and_their_next_turn_pays_the_prefill(tmp_path, monkeypatch):
    """--sessions behind the prefix router: each conversation lives on one replica (its turns share
    its leading blocks). Replica 1 killed: each conversation that lived there sends its next turn to
    the survivor, which finds none of it cached (the server's own count) and prefills the whole
    conversation so far, its TTFT up by that prefill; its turns after are cached again. Conversations
    on the survivor all along find their history cached throughout."""
    with serve(
        "--replicas", "2", "--router", "prefix", "--admin-token", TOKEN, "--enable-prompt-tokens-details"
    ) as server:
        window = f"""replica-kill
    kind: replica
    target: {{sim: "{server.url}", replica: 1}}
    at: 4s
    duration: 4s
    params: {{action: kill}}"""
        more = ("-u", "4", "-r", "4", "--max-tokens", "4", "--prompt-sizes", "short", "--sessions", "--turns", "40")
        more += ("--turn-think", "0.4s", "--prefix-tokens", "1000")  # a long conversation from its first turn
        run, requests = drill(tmp_path, monkeypatch, server.url, window, 12, *more)
    kill = run["faults"][0]["actual_start"]
    convs: dict[str, list[dict]] = {}
    for r in sorted(requests, key=lambda r: r["turn"] or 0):
        if r["session"] is not None and r["outcome"] != "cancelled":
            convs.setdefault(r["session"], []).append(r)
    per_token = profile.load(profile.DEFAULT).step.prefill_token
    cold, kept = [], []
    for turns in convs.values():
        before = [r for r in turns if r["intended"] + r["end_s"] < kill and r["outcome"] == "ok"]
        after = [r for r in turns if r["sent"] > kill]
        if len(before) < 2 or len(after) < 2:
            continue
        assert {r["replica"] for r in before[1:]} == {before[-1]["replica"]}  # the router keeps it on one
        assert all(cached(r) >= 0.9 * p["prompt_tokens"] for p, r in itertools.pairwise(before))
        assert {r["replica"] for r in after} == {"0"}
        assert all(r["outcome"] == "ok" for r in after)
        (cold if before[-1]["replica"] == "1" else kept).append((before, after))
    assert cold, convs
    assert kept, convs
    firsts = [after[0] for _, after in cold]
    for before, after in cold:
        first = after[0]
        assert first["turn"] == before[-1]["turn"] + 1
        assert cached(first) < 0.1 * first["prompt_tokens"], first  # the survivor had none of it
        assert all(cached(r) >= 0.9 * p["prompt_tokens"] for p, r in itertools.pairwise(after))  # warm again
        base = statistics.median(r["ttft"] for r in before[1:])
        saved = per_token * (
            first["prompt_tokens"] - cached(first) - (before[-1]["prompt_tokens"] - cached(before[-1]))
        )
        up, k = first["ttft"] - base, overlapping(first, firsts)
        print(f"{first['session']} turn {first['turn']}: {first['prompt_tokens']} tokens cold, TTFT up "
              f"{up * 1000:.1f} ms (prefill {saved * 1000:.1f} ms; {k} cold at once)")  # fmt: skip
        assert 0.6 * saved < up < 1.4 * k * saved + 0.03, (first, up, saved, k)
        later = statistics.median(r["ttft"] for r in after[1:]) - base
        assert abs(later) < saved / 3, later
    for before, after in kept:  # no step: their history stays cached on the survivor
        assert all(cached(r) >= 0.9 * p["prompt_tokens"] for p, r in itertools.pairwise([before[-1], *after]))
    rows = {row["lang"]: row for row in run["sessions"]}
    failed = {r["session"] for r in requests if r["session"] and r["outcome"] not in ("ok", "cancelled")}
    assert sum(row["cut_failed"] for row in rows.values()) == len(
        failed
    )  # a turn cut by the kill cuts its conversation


def kv_drill(tmp_path, monkeypatch, mode: str) -> tuple[dict, list[dict], list[dict], list[dict]]:
    """A KV partition window from 3 s to 6 s of a 10 s run against one prefill and one decode engine:
    the run, the requests begun before it, within it and after it."""
    cluster = ("--disaggregate", "1:1", "--kv-failure", mode, "--kv-timeout", str(KV_TIMEOUT_S))
    with serve(*cluster, "--kv-bytes-scale", "0.01", "--admin-token", TOKEN) as server:
        window = f"""kv-partition
    kind: kv_link
    target: {{sim: "{server.url}"}}
    at: 3s
    duration: 3s
    params: {{action: partition}}"""
        more = ("-u", "4", "-r", "4", "--max-tokens", "8", "--stall-limit", str(STALL_S))
        run, requests = drill(tmp_path, monkeypatch, server.url, window, 10, *more)
    (w,) = run["faults"]
    requests = [r for r in requests if r["outcome"] != "cancelled"]  # by the test's end
    before = [r for r in requests if r["sent"] < w["actual_start"] - 0.1]
    during = [r for r in requests if r["phase"] == "kv-partition"]
    after = [r for r in requests if r["sent"] > w["actual_end"] + 0.1]
    assert before
    assert during
    assert all(r["outcome"] == "ok" and r["kv"] == "pulled" for r in before + after), {
        (r["outcome"], r["kv"]) for r in before + after
    }
    return run, before, during, after


def kv_counts(run: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in ending(run, "kv-partition"):
        for way, cell in row["kv"].items():
            counts[way] = counts.get(way, 0) + cell["requests"]
    return counts


@pytest.mark.timing
def test_a_kv_partition_fails_fast(tmp_path, monkeypatch):
    run, _, during, _ = kv_drill(tmp_path, monkeypatch, "fail-fast")
    failed = [r for r in during if r["kv"] == "failed"]
    assert len(failed) >= 0.8 * len(during)
    assert {r["outcome"] for r in failed} == {"http_503"}
    # the decode engine gave up after 0.25 s without a byte of KV: an error well under a second
    assert max(r["end_s"] for r in failed) < 0.6
    assert kv_counts(run)["failed"] == len(failed)


@pytest.mark.timing
def test_a_kv_partition_recomputes(tmp_path, monkeypatch):
    run, before, during, _ = kv_drill(tmp_path, monkeypatch, "recompute")
    again = [r for r in during if r["kv"] == "recomputed"]
    assert len(again) >= 0.8 * len(during)
    assert all(r["outcome"] == "ok" for r in during)
    # each waited out decode's 0.25 s without a KV byte, then decode prefilled it itself: up by about
    # that and its prefill, less what the pull no longer costs (decode's frontend ran meanwhile)
    assert min(r["ttft"] for r in again) > 0.25
    up = statistics.median(r["ttft"] for r in again) - statistics.median(r["ttft"] for r in before)
    assert 0.15 < up < 0.6, up
    assert kv_counts(run)["recomputed"] == len(again)


@pytest.mark.timing
def test_a_kv_partition_hangs_until_the_kv_timeout(tmp_path, monkeypatch):
    run, _, during, _ = kv_drill(tmp_path, monkeypatch, "hang")
    hung = [r for r in during if r["kv"] == "timed_out"]
    assert hung, [(r["kv"], r["outcome"], r["silent_s"]) for r in during]  # what a failure shows
    assert {r["outcome"] for r in hung} == {"stranded"}
    for r in hung:  # nothing at all from the server until decode's --kv-timeout, then its 504
        assert KV_TIMEOUT_S - 0.05 < r["silent_s"] < KV_TIMEOUT_S + 0.5, r
    assert kv_counts(run)["timed_out"] == len(hung)
    assert sum(row["stranded"] for row in ending(run, "kv-partition")) >= len(hung)
