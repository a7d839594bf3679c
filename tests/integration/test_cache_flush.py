"""The fault `cache_flush` against a real `llmchaos serve`: the injector's POST /reset_prefix_cache
empties the prefix cache (the next prompt finds nothing cached, the one after finds it again), counted
in llmchaos_prefix_cache_resets_total; behind `--router prefix` it reaches every replica and the
router forgets what they held. And the drill in docs/loadtest.md: conversations whose turns open with
a long prefix, a flush in the middle of the run, each user's next turn prefilled cold (its cached
tokens 0, its TTFT up by the prefill the cache had saved), warm again after."""

from __future__ import annotations

import statistics

import httpx
import pytest

from faults.injectors.base import InjectError
from faults.injectors.cache_flush import CacheFlush
from reference_server import profile
from tests.integration.test_cluster_drills import TOKEN as DRILL_TOKEN
from tests.integration.test_cluster_drills import drill
from tests.integration.test_cluster_server import AUTH, TOKEN, admin, series
from tests.procs import Server, serve

MODEL = "llmchaos-sim-8b"
HISTORY = "You are a helpful assistant who answers every question in one short sentence. " * 12


def cached(server: Server, text: str) -> tuple[int, int, str]:
    """(prompt tokens, cached prompt tokens, the replica) of a chat request for `text`."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 2}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    hit = usage.get("prompt_tokens_details", {"cached_tokens": 0})["cached_tokens"]  # left out when 0
    return usage["prompt_tokens"], hit, r.headers.get("x-llmchaos-replica", "")


def flush(server: Server, monkeypatch) -> CacheFlush:
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
    injector = CacheFlush({"sim": server.url})
    assert injector.probe() is None
    saved = injector.save({})
    injector.apply("cold", {}, saved)
    assert injector.read_back()["resets"] == saved["resets"] + 1
    injector.revert(saved)  # nothing to undo, and nothing undone
    return injector


def test_a_flush_empties_the_prefix_cache_which_then_refills(monkeypatch):
    with serve("--sim-time-scale", "0.1", "--admin-token", TOKEN, "--enable-prompt-tokens-details") as s:
        prompt, hit, _ = cached(s, HISTORY + "First question.")
        assert hit == 0
        _, hit, _ = cached(s, HISTORY + "Second question.")
        assert hit > 0.8 * prompt
        assert s.metric("llmchaos_prefix_cache_resets_total") == 0
        denied = httpx.post(s.url + "/reset_prefix_cache")  # without the token: refused, nothing reset
        assert denied.status_code == 401
        flush(s, monkeypatch)
        assert s.metric("llmchaos_prefix_cache_resets_total") == 1
        assert cached(s, HISTORY + "Third question.")[1] == 0  # cold: the whole prompt again
        assert cached(s, HISTORY + "Fourth question.")[1] > 0.8 * prompt  # and cached again
    with serve("--sim-time-scale", "0.1") as s:  # no --admin-token: the probe says how to start it
        bare = CacheFlush({"sim": s.url})
        assert "refused (403)" in (bare.probe() or "")
        with pytest.raises(InjectError, match="admin API disabled: start with --admin-token"):
            bare.apply("cold", {}, {"resets": None})


def test_behind_the_prefix_router_a_flush_reaches_every_replica_and_the_router_forgets(monkeypatch):
    with serve("--replicas", "2", "--router", "prefix", "--admin-token", TOKEN, "--enable-prompt-tokens-details") as s:
        _, _, first = cached(s, HISTORY + "Turn one.")
        _, hit, again = cached(s, HISTORY + "Turn two.")
        assert (again, hit > 0) == (first, True)
        assert admin(s, "POST", "/admin/router/holder", {"prompt": HISTORY})["replica"] == int(first)
        answer = httpx.post(s.url + "/reset_prefix_cache", headers=AUTH, timeout=30).json()
        assert set(answer["replicas"]) == {"0", "1"}
        assert [answer["replicas"][i]["resets"] for i in "01"] == [1, 1]
        assert answer["replicas"][first]["blocks_dropped"] > 0
        assert admin(s, "POST", "/admin/router/holder", {"prompt": HISTORY})["replica"] is None
        assert [series(s, "llmchaos_prefix_cache_resets_total", replica=i) for i in "01"] == [1, 1]
        assert cached(s, HISTORY + "Turn three.")[1] == 0
        flush(s, monkeypatch)  # the injector through the router: it reads back replica 0's count
        assert [series(s, "llmchaos_prefix_cache_resets_total", replica=i) for i in "01"] == [2, 2]


PREFIX_TOKENS = 2000


@pytest.mark.timing
def test_a_cache_flush_window_shows_each_users_next_turn_prefilled_cold(tmp_path, monkeypatch):
    """Four users' conversations, each opening with the user's own prefix of 2000 tokens; the window
    flushes at 4 s. Each conversation's first turn sent after it finds nothing cached and prefills its
    whole prompt again; its next turns find the conversation again."""
    with serve("--admin-token", DRILL_TOKEN, "--enable-prompt-tokens-details") as server:
        window = f"""cold-cache
    kind: cache_flush
    target: {{sim: "{server.url}"}}
    at: 4s
    duration: 3s"""
        more = ("-u", "4", "-r", "4", "--max-tokens", "4", "--sessions", "--turns", "20", "--turn-think", "0.5s")
        run, requests = drill(
            tmp_path, monkeypatch, server.url, window, 11, *more, "--prefix-tokens", str(PREFIX_TOKENS)
        )
        resets = server.metric("llmchaos_prefix_cache_resets_total")
    assert resets == 1
    (w,) = run["faults"]
    sessions: dict[str, list[dict]] = {}
    for r in sorted(requests, key=lambda r: r["turn"]):
        if r["outcome"] == "ok":
            sessions.setdefault(r["session"], []).append(r)
    assert len(sessions) == 4  # one conversation each, longer than the run
    prefill = profile.load(profile.DEFAULT).step.prefill_token  # a prompt token's, as the cache saves it
    first = [next(r for r in turns if r["sent"] > w["actual_start"]) for turns in sessions.values()]
    together = prefill * sum(r["prompt_tokens"] for r in first)  # every user's cold prefill at once
    for s, turns in sessions.items():
        warm = [r for r in turns[1:] if r["intended"] + r["e2e"] < w["actual_start"]]
        after = [r for r in turns if r["sent"] > w["actual_start"]]
        assert len(warm) >= 2, s
        assert len(after) >= 3, s
        assert all(r["cached_tokens"] >= 0.9 * PREFIX_TOKENS for r in warm), s
        cold, rewarmed = after[0], after[1:]
        assert cold["phase"] == "cold-cache"
        assert not cold["cached_tokens"], cold  # 0, which vLLM and the reference server leave out
        assert all(r["cached_tokens"] >= 0.9 * PREFIX_TOKENS for r in rewarmed), s
        base = statistics.median(r["ttft"] for r in warm)
        up = cold["ttft"] - base
        print(f"{s}: TTFT warm {base * 1000:.1f} ms, turn {cold['turn']} after the flush {cold['ttft'] * 1000:.1f} ms")
        # its whole prompt prefilled again, at least; at most with every user's, which came at once
        assert 0.6 * prefill * cold["prompt_tokens"] < up < 1.4 * together + 0.03, (s, up)
        assert abs(statistics.median(r["ttft"] for r in rewarmed) - base) < prefill * PREFIX_TOKENS / 2, s
