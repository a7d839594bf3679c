"""--sessions against a server that records what each request sent and what it streamed back: each
turn carries the conversation so far, the answers exactly as the server gave them; turns wait for
the answer and the think time; conversations cut by a failure or by the test's end are counted so."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections import defaultdict

import httpx
import pytest

from llmchaos import languages
from llmchaos.metrics import TURN_BUCKETS, turn_bucket
from loadtests.arrivals import ArrivalPlan, schedule
from reference_server.config import EngineConfig
from tests.integration.loadtest_helpers import distributed, locust, only_run, summary
from tests.integration.test_sse_proxy import proxy
from tests.procs import serve
from tests.servers import scripted

THINK_S = 0.2


@pytest.mark.parametrize("mode", ["one process", "two workers"])
def test_each_turn_carries_the_conversation_the_server_gave(tmp_path, mode):
    with scripted.running(3, "--modes", "de=status:503") as url:
        args = ("--host", url, "--results-dir", str(tmp_path), "-u", "6", "-r", "6", "-t", "5s", "--langs", "en,de")
        args += ("--max-tokens", "5", "--sessions", "--turns", "2-4", "--turn-think", f"{THINK_S}s", "--seed", "4")
        args += ("--think-time", "0.05", "--exit-code-on-error", "0")  # de's failures: no hot loop, and meant
        proc = locust(*args) if mode == "one process" else distributed(*args)
        truth = {r["request_id"]: r for r in httpx.get(url + "/truth").json()["requests"]}
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    sessions: dict[str, list[dict]] = defaultdict(list)
    for r in requests:
        assert (r["session"] is None) == (r["turn"] is None), r
        sessions[r["session"]].append(r)
    assert None not in sessions

    en = {s: sorted(turns, key=lambda r: r["turn"]) for s, turns in sessions.items() if turns[0]["lang"] == "en"}
    long = [turns for turns in en.values() if len(turns) >= 3]
    assert long, {s: len(t) for s, t in en.items()}
    for turns in en.values():
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))
        history: list[dict] = []
        for prev, r in zip([None, *turns], turns, strict=False):
            if r["outcome"] == "cancelled" and r["at_stop"]:
                break
            assert r["outcome"] == "ok", r
            sent = truth[r["request_id"]]["messages"]
            # everything before this turn's prompt is the conversation so far, as the server answered it
            assert sent[:-1] == history, (r["session"], r["turn"])
            assert sent[-1]["role"] == "user"
            assert sent[-1]["content"]
            history += [sent[-1], {"role": "assistant", "content": truth[r["request_id"]]["text"]}]
            if prev is not None:  # sent after the previous answer's end, and the think time
                assert r["sent"] - (prev["intended"] + prev["e2e"]) >= THINK_S - 0.005, (prev, r)

    # each turn bucket's histogram holds exactly its turns' TTFTs
    ok = [r for turns in en.values() for r in turns if r["outcome"] == "ok"]
    for bucket, turns in (("1", {1}), ("2-3", {2, 3}), ("4-7", {4})):
        ttfts = sorted(r["ttft"] for r in ok if r["turn"] in turns)
        if ttfts:
            row = summary(run, "en", f"ttft_turn_{bucket}")
            assert row["count"] == len(ttfts)
            assert row["max"] == pytest.approx(ttfts[-1], rel=0.01)

    de = [turns for turns in sessions.values() if turns[0]["lang"] == "de"]
    assert de
    assert all(len(t) == 1 for t in de)  # a failed turn cuts its conversation
    failed = [t for t in de if t[0]["outcome"] == "http_503"]
    assert len(failed) + sum(t[0]["at_stop"] for t in de) == len(de)

    rows = {row["lang"]: row for row in run["sessions"]}
    assert rows["de"] == {**rows["de"], "started": len(de), "turns": len(de), "completed": 0}
    assert (rows["de"]["cut_failed"], rows["de"]["cut_stop"]) == (len(failed), len(de) - len(failed))
    # a user begins its next conversation only once its last one completed: ids are LANG-USER-K
    followed = [s for s in en if s.rpartition("-")[0] + f"-{int(s.rpartition('-')[2]) + 1}" in en]
    assert all(r["outcome"] == "ok" for s in followed for r in en[s])
    assert rows["en"] == {**rows["en"], "started": len(en), "cut_failed": 0, "turns": sum(map(len, en.values()))}
    # each user's last conversation: cut by the stop, or completed just before it (its last answer in,
    # the stop before its next began)
    last = [s for s in en if s not in followed]
    assert len(last) == len({s.rpartition("-")[0] for s in en})  # one per user
    just = rows["en"]["completed"] - len(followed)
    assert 0 <= just <= len(last)
    assert rows["en"]["cut_stop"] == len(last) - just
    assert sum(not en[s][-1]["at_stop"] and en[s][-1]["outcome"] == "ok" for s in last) >= just

    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    md = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "report", str(run_dir), "--md"], capture_output=True, text=True
    )
    assert md.returncode == 0, md.stderr
    counts = [rows["en"][k] for k in ("started", "completed", "cut_failed", "cut_stop", "turns")]
    assert f"| en | {' | '.join(map(str, counts))} | " in md.stdout.split("#### Conversations")[1], md.stdout
    row = next(line for line in md.stdout.split("#### Conversations")[1].splitlines() if line.startswith("| en |"))
    assert row.rstrip(" |").endswith("n/a")  # this server gives no cached counts: no share, not 0 %


@pytest.mark.parametrize("mode", ["one process", "two workers"])
def test_open_loop_conversations_begin_at_the_seeded_arrivals(tmp_path, mode):
    """--sessions with --rate: each arrival of the master's seeded schedule begins a conversation of
    its language (taken by a free user: two users cannot keep up, so some wait), its later turns
    follow its answers after the think time; a first turn's TTFT counts from its arrival."""
    rate, seed, langs = 4.0, 7, ("en", "de")
    with scripted.running(3) as url:
        args = (
            "--host",
            url,
            "--results-dir",
            str(tmp_path),
            "-u",
            "4",
            "-r",
            "4",
            "-t",
            "6s",
            "--langs",
            ",".join(langs),
        )
        args += ("--max-tokens", "5", "--sessions", "--turns", "5", "--turn-think", f"{THINK_S}s", "--seed", str(seed))
        args += ("--rate", str(rate))
        proc = locust(*args) if mode == "one process" else distributed(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    assert run["load_profile"]["mode"] == "open"
    assert run["load_profile"]["sessions"] == {
        "turns": {"distribution": "constant", "value": 5},
        "think": {"distribution": "constant", "value": THINK_S},
        "tool_rate": 0.0,
    }
    firsts = sorted((r for r in requests if r["turn"] == 1), key=lambda r: r["intended"])
    unsent = [r for r in requests if r["session"] is None]  # arrivals no user took before the stop
    assert all(r["outcome"] == "cancelled" and r["at_stop"] for r in unsent)
    arrived = sorted(firsts + unsent, key=lambda r: r["intended"])
    plan = ArrivalPlan(0.0, rate, "poisson", 1.0, seed, langs, tuple(languages.get(t).weight for t in langs), None)
    due = list(itertools.islice(schedule(plan), len(arrived)))
    t0 = arrived[0]["intended"] - due[0][1]
    assert [(round(r["intended"] - t0, 4), r["lang"]) for r in arrived] == [(round(t, 4), lang) for _, t, lang in due]
    assert len(arrived) >= sum(
        1 for _ in itertools.takewhile(lambda a: a[1] < 4.0, schedule(plan))
    )  # every arrival of the test, none dropped
    late = [r for r in firsts if r["sent"] - r["intended"] > 0.1 and r["outcome"] == "ok"]
    assert late  # two users per language at 4 conversations/s of ~5 x 0.2 s: most arrivals wait for one
    assert all(r["ttft"] >= r["sent"] - r["intended"] for r in late)  # counted from the arrival
    by_session: dict[str, list[dict]] = defaultdict(list)
    for r in requests:
        if r["session"] is not None:
            by_session[r["session"]].append(r)
    for turns in by_session.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))
        for prev, r in itertools.pairwise(turns):  # the next turn: the answer, then the think time
            assert r["sent"] - (prev["intended"] + prev["e2e"]) >= THINK_S - 0.005, (prev, r)
    rows = {row["lang"]: row for row in run["sessions"]}
    assert sum(row["started"] for row in rows.values()) == len(firsts)
    assert sum(row["completed"] for row in rows.values()) == sum(
        len(t) == 5 and t[-1]["outcome"] == "ok" and not t[-1]["at_stop"] for t in by_session.values()
    )


@pytest.mark.parametrize("api", ["openai-chat", "gemini"])
def test_later_turns_find_the_conversation_in_the_reference_servers_prefix_cache(tmp_path, api):
    """The server's own count of the cached prompt tokens (vLLM's prompt_tokens_details with
    --enable-prompt-tokens-details; Gemini's cachedContentTokenCount): from the second turn on, the
    conversation so far, the previous turn's prompt, is found in its prefix cache, but for the
    block its last tokens share with the answer."""
    block = EngineConfig().block_size
    with serve("--sim-time-scale", "0.3", "--enable-prompt-tokens-details") as server:
        args = ("--host", server.url, "--api", api, "--results-dir", str(tmp_path), "-u", "3", "-r", "3", "-t", "6s")
        args += ("--langs", "en", "--max-tokens", "8", "--sessions", "--turns", "4-8", "--prefix-tokens", "600")
        proc = locust(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, _, requests = only_run(tmp_path)
    by_session: dict[str, dict[int, dict]] = defaultdict(dict)
    for r in requests:
        if r["outcome"] == "ok":
            by_session[r["session"]][r["turn"]] = r
    later = [(turns[k - 1], r) for turns in by_session.values() for k, r in turns.items() if k > 1 and k - 1 in turns]
    assert len(later) >= 6, by_session
    for prev, r in later:
        assert r["prompt_tokens"] > prev["prompt_tokens"] + prev["output_tokens"]  # the history, then a prompt
        assert prev["prompt_tokens"] - 2 * block <= r["cached_tokens"] < r["prompt_tokens"], (prev, r)
    # the report's cached share per turn bucket: the bucket's cached prompt tokens over its prompt tokens
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in requests:
        if r["prompt_tokens"] is not None:
            sums[turn_bucket(r["turn"])][0] += r["cached_tokens"] or 0
            sums[turn_bucket(r["turn"])][1] += r["prompt_tokens"]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    md = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "report", str(run_dir), "--md"], capture_output=True, text=True
    )
    row = next(line for line in md.stdout.split("#### Conversations")[1].splitlines() if line.startswith("| en |"))
    shares = [cell.strip() for cell in row.strip(" |").split("|")][-len(TURN_BUCKETS) :]
    want = [f"{sums[b][0] / sums[b][1]:.0%}" if b in sums else "" for b in TURN_BUCKETS]
    assert shares == want, row  # each turn's cache hit is held to its own history above, not to a share's floor


@pytest.mark.parametrize("api", ["openai-chat", "gemini"])
def test_tool_call_turns_send_each_result_back_until_the_answer_is_text(tmp_path, api):
    """--tool-rate 1 against the reference server, which calls a tool on the first one or two
    requests after each user message (`auto`): each turn is its user message (hop 0), then one
    request per tool result (hops 1, 2), the last answered in text; the server takes every shape
    the harness sends back (a wrong one is its 400), and each hop finds the turn so far cached."""
    block = EngineConfig().block_size
    with serve("--sim-time-scale", "0.3", "--enable-prompt-tokens-details") as server:
        args = ("--host", server.url, "--api", api, "--results-dir", str(tmp_path), "-u", "3", "-r", "3", "-t", "6s")
        args += ("--langs", "en,ja", "--max-tokens", "8", "--sessions", "--turns", "2-3", "--tool-rate", "1")
        proc = locust(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    sent = [r for r in requests if not (r["outcome"] == "cancelled" and r["at_stop"])]
    assert all(r["outcome"] == "ok" for r in sent), [r for r in sent if r["outcome"] != "ok"][:2]
    turns: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in sent:
        turns[r["session"], r["turn"]].append(r)
    steps: dict[str, list[float]] = defaultdict(list)
    for hops in turns.values():
        hops.sort(key=lambda r: r["hop"])
        assert [r["hop"] for r in hops] == list(range(len(hops)))
        assert all(r["tool_calls"] == 1 for r in hops[:-1])  # each call answered in the next
        assert all(r["step"] is None for r in hops[:-1])
        last = hops[-1]
        if last["tool_calls"] == 0:  # answered in text: the turn is whole, and its step is timed
            assert 2 <= len(hops) <= 3, hops  # one or two calls, then the answer
            # the step: the user message's due time to the answer's end, each hop's own time within it
            assert last["step"] == pytest.approx(last["intended"] + last["e2e"] - hops[0]["intended"], abs=1e-6)
            assert sum(r["e2e"] for r in hops) <= last["step"] + 1e-6
            steps[last["lang"]].append(last["step"])
        for prev, r in itertools.pairwise(hops):
            assert r["sent"] >= prev["intended"] + prev["e2e"]  # the result goes once the call is in
            assert prev["prompt_tokens"] - 2 * block <= r["cached_tokens"] < r["prompt_tokens"], (prev, r)
        for r in hops:  # the time to the tool call is its TTFT; Gemini sends a call whole, in its last chunk
            assert 0 < r["ttft"] <= r["e2e"]
            if api == "gemini" and r["tool_calls"]:
                assert r["ttft"] == r["e2e"]
    assert sum(map(len, steps.values())) >= 4, turns
    for lang, each in steps.items():
        row = summary(run, lang, "step")
        assert row["count"] == len(each)
        assert row["max"] == pytest.approx(max(each), rel=0.01)
    rows = {row["lang"]: row for row in run["sessions"]}
    for lang in ("en", "ja"):
        assert rows[lang]["tool_hops"] == sum(r["hop"] > 0 for r in requests if r["lang"] == lang)
        assert rows[lang]["turns"] == sum(r["hop"] == 0 for r in requests if r["lang"] == lang)


@pytest.mark.timing
def test_a_first_token_delay_during_tool_hops_shows_in_the_agents_step(tmp_path):
    """The drill in docs/loadtest.md: a first-token delay of 0.3 s through the SSE proxy while
    agents run turns of one or two tool round trips. Every request sent in the window waits it, so a
    turn pays it once per request: its step (user message to the text answer) grows by that, not by
    the one request's TTFT."""
    delay = 0.3
    with serve("--sim-time-scale", "0.3") as server, proxy(server.url) as p:
        schedule = tmp_path / "schedule.yaml"
        schedule.write_text(f"""faults:
  - name: first-token-delay
    kind: sse
    target: {{proxy: "{p.split("//")[1]}"}}
    at: 3s
    duration: 4s
    params: {{first_event_delay: {delay}}}
""")
        args = ("--host", p, "--results-dir", str(tmp_path), "-u", "4", "-r", "4", "-t", "10s", "--langs", "en")
        args += ("--max-tokens", "8", "--sessions", "--turns", "3", "--tool-rate", "1", "--schedule", str(schedule))
        proc = locust(*args, "--fault-journal", str(tmp_path / "journal.json"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, _, requests = only_run(tmp_path)
    (w,) = run["faults"]
    ok = [r for r in requests if r["outcome"] == "ok"]
    inside = [r for r in ok if w["actual_start"] <= r["intended"] < w["actual_end"]]
    assert all(r["ttft"] >= delay for r in inside)  # every hop sent in the window waits the delay
    turns: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in ok:
        turns[r["session"], r["turn"]].append(r)
    whole_inside = [t for t in turns.values() if t[-1]["step"] is not None and all(r in inside for r in t)]
    assert whole_inside
    for t in whole_inside:  # a turn all in the window pays the delay once per request
        assert t[-1]["step"] >= delay * len(t), t
    faulted, baseline = summary(run, "en", "step", "first-token-delay"), summary(run, "en", "step")
    assert faulted["p50"] >= baseline["p50"] + delay, (faulted, baseline)
    ttft_faulted = summary(run, "en", "ttft", "first-token-delay")
    assert faulted["p50"] > ttft_faulted["p50"] + delay  # the step holds more than one request's delay
